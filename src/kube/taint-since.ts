import type { Clock } from '../core/clock.js';
import type { SlimNode, SlimTaint } from './resources.js';
import { NOT_READY, UNREACHABLE } from './tolerations.js';
import type { WatchHandle } from './watch.js';

/** The node lifecycle controller's NoExecute taint on a node, if any. */
function controllerTaint(n: { taints: SlimTaint[] }): SlimTaint | undefined {
  return n.taints.find((t) => t.effect === 'NoExecute' && (t.key === UNREACHABLE || t.key === NOT_READY));
}

/**
 * Since when each node has carried the controller's NoExecute taint without a break. The controller re-adds the
 * taint with a fresh timeAdded while the node stays down (seen on 1.20: every eviction period), but the taint
 * manager keeps the eviction times it scheduled first, so the first sighting is what counts. For taints already
 * there when watching began (or after a relist), the node's NotReady transition is the earliest they can date from.
 */
export function trackTaintedSince(nodes: WatchHandle<SlimNode>, clock: Clock): (node: string) => number | undefined {
  const since = new Map<string, number>();
  const track = (n: SlimNode, unseen: boolean) => {
    const t = controllerTaint(n);
    if (!t) since.delete(n.name);
    else if (!since.has(n.name))
      since.set(n.name, Math.min(t.timeAdded ?? clock.now(), unseen ? (n.ready?.transition ?? Infinity) : Infinity));
  };
  let synced = nodes.freshness().synced;
  if (synced) for (const n of nodes.store.values()) track(n, true);
  nodes.subscribe((c) => {
    if (c.type === 'synced') {
      synced = true;
      for (const n of nodes.store.values()) track(n, true);
    } else if ((c.type === 'added' || c.type === 'modified') && synced) track(c.object, c.relist);
    else if (c.type === 'deleted') since.delete(c.object.name);
  });
  return (node) => since.get(node);
}
