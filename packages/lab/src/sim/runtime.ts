import { appendFile, mkdir, readFile, rename, writeFile } from 'node:fs/promises';
import { join } from 'node:path';

/**
 * The simulated container runtime of one node. Its state on disk is the ground truth of "what still runs on
 * this node": a simulator that stops leaves its containers running; only the simulator kills them, and each
 * kill is appended to the kill log with its time and reason.
 */
export interface SimContainer {
  id: string;
  namespace: string;
  pod: string;
  podUid: string;
  container: string;
  image: string;
  podIp: string;
  startedAt: string;
}

export interface KillRecord {
  at: string;
  /** Milliseconds since the epoch. */
  atMs: number;
  node: string;
  namespace: string;
  pod: string;
  podUid: string;
  container: string;
  containerId: string;
  reason: string;
  startedAt: string;
}

export interface RuntimeState {
  node: string;
  containers: SimContainer[];
  kills: KillRecord[];
}

const CONTAINERS = 'containers.json';
const KILLS = 'kills.jsonl';

export function runtimeDirOf(stateDir: string, node: string): string {
  return join(stateDir, 'nodes', node, 'runtime');
}

/** A node's running simulated containers and its kill log (empty when the node never ran a pod). */
export async function readRuntime(stateDir: string, node: string): Promise<RuntimeState> {
  return readRuntimeDir(runtimeDirOf(stateDir, node), node);
}

export async function readRuntimeDir(dir: string, node: string): Promise<RuntimeState> {
  const containers = await readFile(join(dir, CONTAINERS), 'utf8')
    .then((t) => (JSON.parse(t) as { containers: SimContainer[] }).containers)
    .catch(() => [] as SimContainer[]);
  const kills = (await readFile(join(dir, KILLS), 'utf8').catch(() => ''))
    .split('\n')
    .filter((l) => l.trim())
    .flatMap((l) => {
      try {
        return [JSON.parse(l) as KillRecord];
      } catch {
        return [];
      }
    });
  return { node, containers, kills };
}

/** The runtime a simulator owns: in memory, written through to disk on every change. */
export class RuntimeStore {
  private containers = new Map<string, SimContainer>();
  private loaded = false;
  private writing: Promise<void> = Promise.resolve();

  constructor(
    readonly dir: string,
    readonly node: string,
  ) {}

  async load(): Promise<void> {
    await mkdir(this.dir, { recursive: true });
    const state = await readRuntimeDir(this.dir, this.node);
    this.containers = new Map(state.containers.map((c) => [c.id, c]));
    this.loaded = true;
  }

  list(): SimContainer[] {
    return [...this.containers.values()];
  }

  ofPod(podUid: string): SimContainer[] {
    return this.list().filter((c) => c.podUid === podUid);
  }

  /** Pod IPs in use, to hand out free ones. */
  podIps(): Set<string> {
    return new Set(this.list().map((c) => c.podIp));
  }

  async start(containers: SimContainer[]): Promise<void> {
    for (const c of containers) this.containers.set(c.id, c);
    await this.persist();
  }

  /** Kills a pod's containers, recording each; returns the records. */
  async kill(podUid: string, reason: string, nowMs: number): Promise<KillRecord[]> {
    const records: KillRecord[] = [];
    for (const c of this.ofPod(podUid)) {
      this.containers.delete(c.id);
      records.push({
        at: new Date(nowMs).toISOString(),
        atMs: nowMs,
        node: this.node,
        namespace: c.namespace,
        pod: c.pod,
        podUid: c.podUid,
        container: c.container,
        containerId: c.id,
        reason,
        startedAt: c.startedAt,
      });
    }
    if (!records.length) return records;
    await this.chain(() => appendFile(join(this.dir, KILLS), records.map((r) => `${JSON.stringify(r)}\n`).join('')));
    await this.persist();
    return records;
  }

  private persist(): Promise<void> {
    if (!this.loaded) throw new Error('RuntimeStore.load() first');
    return this.chain(async () => {
      const file = join(this.dir, CONTAINERS);
      await writeFile(`${file}.tmp`, `${JSON.stringify({ node: this.node, containers: this.list() }, null, 1)}\n`);
      await rename(`${file}.tmp`, file);
    });
  }

  /** Writes one at a time, in order. */
  private chain(fn: () => Promise<void>): Promise<void> {
    const next = this.writing.then(fn, fn);
    this.writing = next.catch(() => {});
    return next;
  }
}
