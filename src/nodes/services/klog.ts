/*
 * The Kubernetes components' log lines, in klog's text format:
 * `I1202 07:55:51.023950    7440 taint_eviction.go:111] message`: severity, month and day, time of day to the
 * microsecond, thread, file:line, then the message. The header has no year and no zone: the caller knows both.
 */

export interface KlogLine {
  severity: 'I' | 'W' | 'E' | 'F';
  /** 1 to 12. */
  month: number;
  day: number;
  hour: number;
  minute: number;
  second: number;
  micros: number;
  message: string;
}

const HEADER = /^([IWEF])(\d\d)(\d\d) (\d\d):(\d\d):(\d\d)\.(\d{6})\s+\d+ [^\]]*\] (.*)$/;

/** A klog text line's header and message; undefined for any other line. */
export function parseKlogLine(line: string): KlogLine | undefined {
  const m = HEADER.exec(line);
  if (!m) return undefined;
  const [month, day, hour, minute, second, micros] = m.slice(2, 8).map(Number) as [number, number, number, number, number, number];
  return { severity: m[1] as KlogLine['severity'], month, day, hour, minute, second, micros, message: m[8]! };
}

/**
 * When a klog line was written, in ms: its header has month, day and time of day in the writer's local time (this
 * machine's, for the lab) and no year; the year is the one of `sinceMs`, or the next when the month is earlier (a log
 * read across New Year's night).
 *
 * @public the lab reads its controller-managers' logs with it (packages/lab, through `kube-runbook/internal/*`)
 */
export function klogTimeMs(l: KlogLine, sinceMs: number): number {
  const since = new Date(sinceMs);
  const year = since.getFullYear() + (l.month - 1 < since.getMonth() ? 1 : 0);
  return new Date(year, l.month - 1, l.day, l.hour, l.minute, l.second).getTime() + Math.round(l.micros / 1000);
}

/*
 * The taint eviction's own message, at the default verbosity:
 * - 1.29 and later (the taint-eviction controller, `pkg/controller/tainteviction`):
 *   `"Deleting pod" controller="taint-eviction-controller" pod="default/web-1"` (the pod is a NamespacedObject:
 *   `ns/name`, `ns/name:uid`, or its MarshalLog struct, which klog prints as `{"name":"web-1","namespace":"default",...}`);
 * - 1.20 (the node lifecycle controller's taint manager): `NoExecuteTaintManager is deleting Pod: default/web-1`.
 */
const NEW = /^"Deleting pod" (?=.*\bcontroller="taint-eviction-controller")(?:.*\s)?pod=(?:"([^"/\s]+)\/([^":\s]+)(?::[^"]*)?"|(\{.*\}))/;
const OLD = /^NoExecuteTaintManager is deleting Pod: ([^/\s]+)\/(\S+)$/;

/** The pod (namespace/name) a kube-controller-manager's message says the taint eviction deletes; undefined otherwise. */
export function taintEvictedPod(message: string): string | undefined {
  const n = NEW.exec(message);
  if (n?.[1] && n[2]) return `${n[1]}/${n[2]}`;
  if (n?.[3]) {
    const named = /"name":"([^"]+)"/.exec(n[3]);
    const ns = /"namespace":"([^"]+)"/.exec(n[3]);
    if (named && ns) return `${ns[1]}/${named[1]}`;
  }
  const o = OLD.exec(message);
  return o ? `${o[1]}/${o[2]}` : undefined;
}
