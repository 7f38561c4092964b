import { readFile } from 'node:fs/promises';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { readRuntime, RuntimeStore, type SimContainer } from './runtime.js';
import { tempDirEach } from 'kube-runbook/internal/testing/temp-dir.js';

const c = (id: string, podUid: string, pod = `pod-${podUid}`): SimContainer => ({
  id,
  namespace: 'demo',
  pod,
  podUid,
  container: 'web',
  image: 'pause',
  podIp: `100.64.1.${id.length + 1}`,
  startedAt: '2026-01-01T00:00:00Z',
});

describe('simulated container runtime', () => {
  let stateDir: string;
  tempDirEach('kr-rt-', (d) => (stateDir = d));

  it('is empty for a node that never ran a pod', async () => {
    expect(await readRuntime(stateDir, 'node-9')).toEqual({ node: 'node-9', containers: [], kills: [] });
  });

  it('keeps containers on disk across restarts of the simulator', async () => {
    const dir = join(stateDir, 'nodes', 'node-1', 'runtime');
    const a = new RuntimeStore(dir, 'node-1');
    await a.load();
    await a.start([c('c1', 'u1'), c('c2', 'u2')]);
    const b = new RuntimeStore(dir, 'node-1');
    await b.load();
    expect(
      b
        .list()
        .map((x) => x.id)
        .sort(),
    ).toEqual(['c1', 'c2']);
    expect((await readRuntime(stateDir, 'node-1')).containers).toHaveLength(2);
  });

  it('records every kill with time and reason, appending to the kill log', async () => {
    const dir = join(stateDir, 'nodes', 'node-1', 'runtime');
    const rt = new RuntimeStore(dir, 'node-1');
    await rt.load();
    await rt.start([c('c1', 'u1'), c('c2', 'u1'), c('c3', 'u2')]);
    const at = Date.UTC(2026, 0, 1, 0, 0, 30);
    const killed = await Promise.all([rt.kill('u1', 'pod deleted', at), rt.kill('u2', 'pod gone', at + 1)]);
    expect(killed.map((k) => k.length)).toEqual([2, 1]);
    expect(await rt.kill('u1', 'again', at + 2)).toEqual([]);
    const state = await readRuntime(stateDir, 'node-1');
    expect(state.containers).toEqual([]);
    expect(state.kills.map((k) => [k.containerId, k.reason, k.at])).toEqual([
      ['c1', 'pod deleted', '2026-01-01T00:00:30.000Z'],
      ['c2', 'pod deleted', '2026-01-01T00:00:30.000Z'],
      ['c3', 'pod gone', '2026-01-01T00:00:30.001Z'],
    ]);
    expect((await readFile(join(dir, 'kills.jsonl'), 'utf8')).trim().split('\n')).toHaveLength(3);
  });
});
