import { lowerBound } from '../core/order.js';
import type { PodGroup } from './model.js';
import type { SlimPod, SlimToleration } from '../kube/resources.js';

/*
 * The pods' part of the forecast's feed (feed.ts): per node its pods grouped by tolerations array, kept by the pods
 * watch as pods come and go, so that the first judgement after many nodes fail at once does not group their pods.
 */

interface Group extends PodGroup {
  keys: string[];
}

/**
 * A node's pods that count, by tolerations array, and the list of those groups once asked for. Held by the feed's
 * slot of a node that exists, so that a judgement reads a failing node's pods without looking them up by name.
 */
export interface NodePods {
  by: Map<SlimToleration[], Group>;
  list?: PodGroup[];
  held?: boolean;
}

const NONE: readonly PodGroup[] = Object.freeze([]);

/** Per node its pods by tolerations. */
export class FeedPods {
  private readonly byNode = new Map<string, NodePods>();

  constructor(
    /** Only pods in these namespaces count, when given. */
    private readonly namespaces: ReadonlySet<string> | undefined,
  ) {}

  /** Whether a pod counts: bound to a node, not being deleted, in `namespaces` when given. */
  private counts(p: SlimPod | undefined): p is SlimPod & { nodeName: string } {
    return p?.nodeName !== undefined && p.deletionTimestamp === undefined && (!this.namespaces || this.namespaces.has(p.namespace));
  }

  /** A node's groups of pods as a list, made when first asked for after a pod comes or goes. */
  list(node: string): readonly PodGroup[] {
    const on = this.byNode.get(node);
    return on ? groupsOf(on) : NONE;
  }

  /** The record of a node that exists, kept while it does, with or without pods. */
  hold(node: string): NodePods {
    let on = this.byNode.get(node);
    if (!on) this.byNode.set(node, (on = { by: new Map() }));
    on.held = true;
    return on;
  }

  /** The node is gone: its record goes with its last pod. */
  release(node: string): void {
    const on = this.byNode.get(node);
    if (!on) return;
    on.held = false;
    if (on.by.size === 0) this.byNode.delete(node);
  }

  /** A pod's change: as it is now (`p`, undefined when gone) and as it was (`before`). */
  change(key: string, p: SlimPod | undefined, before: SlimPod | undefined): void {
    const was = this.counts(before);
    const is = this.counts(p);
    // most changes are a pod's status: it stays in its group
    if (was && is && before.nodeName === p.nodeName && before.tolerations === p.tolerations) return;
    if (was) this.remove(key, before);
    if (is) this.add(key, p);
  }

  private add(key: string, p: SlimPod & { nodeName: string }): void {
    let on = this.byNode.get(p.nodeName);
    if (!on) this.byNode.set(p.nodeName, (on = { by: new Map() }));
    const g = on.by.get(p.tolerations);
    if (g) {
      const i = lowerBound(g.keys, key);
      if (g.keys[i] === key) return;
      g.keys.splice(i, 0, key);
    } else on.by.set(p.tolerations, { node: p.nodeName, tolerations: p.tolerations, keys: [key] });
    // a new list whenever the node's pods change: a store keeps what a judgement worked out of a list (ForecastNode.pods)
    on.list = undefined;
  }

  private remove(key: string, p: SlimPod & { nodeName: string }): void {
    const on = this.byNode.get(p.nodeName);
    const g = on?.by.get(p.tolerations);
    if (!on || !g) return;
    const i = lowerBound(g.keys, key);
    if (g.keys[i] !== key) return;
    g.keys.splice(i, 1);
    on.list = undefined;
    if (g.keys.length > 0) return;
    on.by.delete(p.tolerations);
    if (on.by.size === 0 && !on.held) this.byNode.delete(p.nodeName);
  }
}

/** A node's groups of pods as a list, made when first asked for after a pod comes or goes. */
export const groupsOf = (on: NodePods): readonly PodGroup[] => (on.list ??= [...on.by.values()]);
