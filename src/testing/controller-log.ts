/*
 * The lines of a kube-controller-manager log (klog's text format, the lab's --v=2) that say what the node lifecycle
 * controller and the taint manager decided: queue additions (V(2)), zone states and master disruption mode, the
 * taint manager's deletions (V(0)), and the taint writes that failed (an error line: the tainting pass tries the node
 * again, with a new timeAdded). 1.20 words them as format strings, 1.34 and 1.37 as structured lines.
 */

import { parseKlogLine, taintEvictedPod } from '../nodes/services/klog.js';

export interface ControllerLogLine {
  at: number;
  queued?: string;
  pod?: string;
  zone?: { zone: string; state: string };
  /** A node whose NoExecute taint write (or the removal of the opposite taint) failed. */
  taintFailed?: string;
}

/** "unable to taint ... unresponsive Node "x": ..." (1.20), quoted inside err="..." (1.34, 1.37). */
const TAINT_FAILED = /unable to (?:taint|remove) .*?unresponsive Node \\?"([^"\\]+)\\?"/;

/** The node lifecycle controller's and the taint manager's lines of a kube-controller-manager log (klog, text). */
export function parseControllerLog(text: string, year: number): ControllerLogLine[] {
  const out: ControllerLogLine[] = [];
  for (const line of text.split('\n')) {
    const l = parseKlogLine(line);
    if (!l || l.severity === 'F') continue;
    const at = Date.UTC(year, l.month - 1, l.day, l.hour, l.minute, l.second, l.micros / 1000);
    const msg = l.message;
    const queued = /Adding it to the Taint queue/.test(msg) && (/ node="([^"]+)"/.exec(msg)?.[1] ?? /^Node (\S+) is /.exec(msg)?.[1]);
    const pod = taintEvictedPod(msg);
    const zone = / zone="([^"]*)" newState="(\w+)"/.exec(msg) ?? /detected that zone (.*) is now in state (\w+)/.exec(msg);
    const taintFailed = l.severity === 'E' ? TAINT_FAILED.exec(msg)?.[1] : undefined;
    if (queued) out.push({ at, queued });
    else if (taintFailed) out.push({ at, taintFailed });
    else if (pod) out.push({ at, pod });
    else if (zone) out.push({ at, zone: { zone: zone[1]!.replace(/\\x00|[^\x20-\x7e]/g, ''), state: zone[2]! } });
    else if (/Entering master disruption mode/.test(msg)) out.push({ at, zone: { zone: '*', state: 'MasterDisruption' } });
    else if (/Exiting master disruption mode/.test(msg)) out.push({ at, zone: { zone: '*', state: 'Normal' } });
  }
  return out;
}
