import { mkdir, rm, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { cgroupV1Machine } from '../testing/lab-machine.js';
import { tempDirEach } from 'kube-runbook/internal/testing/temp-dir.js';
import { realClock } from 'kube-runbook/internal/core/clock.js';
import { isKrError } from 'kube-runbook/internal/core/errors.js';
import { silentLogger } from 'kube-runbook/internal/core/logger.js';
import { checkRealNodes, startRealNodes, type RealNode } from './real-nodes.js';

let dir = '';
tempDirEach('kr-real-', (d) => (dir = d));

async function caught(p: Promise<unknown>): Promise<{ code: string; exit: number; message: string; details: string[] }> {
  try {
    await p;
  } catch (e) {
    if (isKrError(e)) return { code: e.code, exit: e.exit, message: e.message, details: e.details };
    throw e;
  }
  throw new Error('it did not fail');
}

describe('--real-nodes on a machine without what it needs', () => {
  it('names every missing thing and exits 2', async () => {
    const e = await caught(
      checkRealNodes(await cgroupV1Machine(dir, ['cpu', 'cpuacct', 'cpuset', 'blkio'], 'nodev\tsysfs\nnodev\ttmpfs\n\text4\n')),
    );
    expect(e.code).toBe('LAB_REAL_NODE_MISSING');
    expect(e.exit).toBe(2);
    expect(e.message).toContain('the cgroup v1 memory controller');
    expect(e.message).toContain('the cgroup v1 pids controller');
    expect(e.message).toContain('the overlay filesystem');
  });

  it('passes where the controllers and overlayfs are there', async () => {
    const cg = join(dir, 'cgroup');
    await mkdir(cg, { recursive: true });
    await writeFile(join(cg, 'cgroup.controllers'), 'cpuset cpu io memory pids\n');
    await writeFile(join(dir, 'filesystems'), 'nodev\toverlay\n');
    await expect(checkRealNodes({ cgroupBase: cg, filesystemsFile: join(dir, 'filesystems') })).resolves.toBeUndefined();
  });

  it('says a containerd that exits at start is bad input, quoting its log, and starts no kubelet', async () => {
    const svc = (name: string, scripts: Record<string, string>) => {
      const d = join(dir, name);
      return {
        d,
        write: async () => {
          await mkdir(d, { recursive: true });
          for (const [f, body] of Object.entries(scripts)) await writeFile(join(d, f), `#!/bin/sh\n${body}\n`, { mode: 0o755 });
        },
      };
    };
    const containerd = svc('containerd', { start: 'exit 0', status: 'exit 3', health: 'exit 1' });
    const kubelet = svc('kubelet', { start: `touch ${join(dir, 'kubelet-started')}` });
    await containerd.write();
    await kubelet.write();
    await writeFile(join(containerd.d, 'log'), 'containerd: failed to load plugin io.containerd.snapshotter.v1.overlayfs: no overlay\n');
    const node = { plan: { node: 'rnode-1' }, containerd: { dir: containerd.d }, kubelet: { dir: kubelet.d } } as unknown as RealNode;
    const e = await caught(startRealNodes([node], { clock: realClock, log: silentLogger }));
    expect(e).toMatchObject({ code: 'LAB_REAL_NODE_RUNTIME', exit: 2, message: 'containerd of rnode-1 exited at start' });
    expect(e.details.join('\n')).toContain('failed to load plugin io.containerd.snapshotter.v1.overlayfs');
    await expect(rm(join(dir, 'kubelet-started'))).rejects.toThrow();
  });
});
