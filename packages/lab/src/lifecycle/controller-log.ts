import { readFile } from 'node:fs/promises';
import { join } from 'node:path';
import type { LabInfo } from '../host/info.js';
import { runtimePathsOf } from '../host/paths.js';

/** A pod the controller-manager says it deleted for a NoExecute taint, at the time its log line carries. */
export interface LoggedEviction {
  /** namespace/name */
  pod: string;
  at: string;
  /** The control-plane node whose controller-manager logged it. */
  from: string;
}

/**
 * The taint eviction's own log line, at the default verbosity, on each release the lab runs:
 * - 1.29 and later (the taint-eviction controller, `pkg/controller/tainteviction`):
 *   `I1202 07:55:51.023950    7440 taint_eviction.go:111] "Deleting pod" controller="taint-eviction-controller" pod="default/web-1"`
 *   (the pod is a NamespacedObject: `ns/name`, `ns/name:uid`, or its MarshalLog struct, which klog prints as
 *   `{"name":"web-1","namespace":"default",...}`);
 * - 1.20 (the node lifecycle controller's taint manager):
 *   `I1202 07:55:51.023950    7440 taint_manager.go:106] NoExecuteTaintManager is deleting Pod: default/web-1`.
 */
const HEADER = /^I(\d\d)(\d\d) (\d\d:\d\d:\d\d\.\d{6})\s+\d+ [^\]]*\] (.*)$/;
const NEW = /^"Deleting pod" (?=.*\bcontroller="taint-eviction-controller")(?:.*\s)?pod=(?:"([^"/\s]+)\/([^":\s]+)(?::[^"]*)?"|(\{.*\}))/;
const OLD = /^NoExecuteTaintManager is deleting Pod: ([^/\s]+)\/(\S+)$/;

function podOf(body: string): string | undefined {
  const n = NEW.exec(body);
  if (n?.[1] && n[2]) return `${n[1]}/${n[2]}`;
  if (n?.[3]) {
    const named = /"name":"([^"]+)"/.exec(n[3]);
    const ns = /"namespace":"([^"]+)"/.exec(n[3]);
    if (named && ns) return `${ns[1]}/${named[1]}`;
  }
  const o = OLD.exec(body);
  return o ? `${o[1]}/${o[2]}` : undefined;
}

/**
 * The evictions in a controller-manager's log text from `sinceMs` on. klog's header has month, day and time of day
 * (this machine's local time), no year: the year is the one of `sinceMs`, or the next when the month is earlier
 * (a run over New Year's night).
 */
export function parseEvictions(text: string, sinceMs: number, from: string): LoggedEviction[] {
  const since = new Date(sinceMs);
  const out: LoggedEviction[] = [];
  for (const line of text.split('\n')) {
    const h = HEADER.exec(line);
    if (!h) continue;
    const pod = podOf(h[4]!);
    if (!pod) continue;
    const month = Number(h[1]) - 1;
    const year = since.getFullYear() + (month < since.getMonth() ? 1 : 0);
    const [hh, mm, rest] = h[3]!.split(':') as [string, string, string];
    const at = new Date(year, month, Number(h[2]), Number(hh), Number(mm), 0, 0).getTime() + Math.round(Number(rest) * 1000);
    if (at >= sinceMs) out.push({ pod, at: new Date(at).toISOString(), from });
  }
  return out;
}

/**
 * The pods the lab's controller-managers say they evicted since `sinceMs`, read from each control-plane node's
 * kube-controller-manager log (an HA lab has three; the leader evicts). A missing log is an error, never "none
 * evicted": the count must come from the controller, not from whoever watched.
 */
export async function controllerEvictions(lab: LabInfo, sinceMs: number): Promise<LoggedEviction[]> {
  const paths = runtimePathsOf(lab.instance, lab.stateDir);
  const members = lab.nodes.filter((n) => n.roles.includes('control-plane'));
  if (!members.length) throw new Error(`lab ${lab.instance} has no control-plane node whose controller-manager log could be read`);
  const found = await Promise.all(
    members.map(async (n) => {
      const file = join(paths.serviceDir(n.name, 'kube-controller-manager'), 'log');
      const text = await readFile(file, 'utf8').catch((e: NodeJS.ErrnoException) => {
        throw new Error(`the controller-manager's log ${file} cannot be read (${e.code ?? e.message}): evictions cannot be counted`);
      });
      return parseEvictions(text, sinceMs, n.name);
    }),
  );
  return found.flat().sort((a, b) => a.at.localeCompare(b.at));
}
