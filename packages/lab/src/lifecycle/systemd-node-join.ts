import { appendFile } from 'node:fs/promises';
import type { Clock } from 'kube-runbook/internal/core/clock.js';
import { EXIT, KrError } from 'kube-runbook/internal/core/errors.js';
import { inSystemdNode } from '../host/systemd-node.js';
import { lastLines } from './control.js';
import { SYSTEMD_NODE_JOIN_CONFIG } from './systemd-node-units.js';

/** An image the node needs: its OCI archive (a path in the node), the name it is imported as, and other names for it. */
export interface SystemdNodeImage {
  archive: string;
  ref: string;
  tags: string[];
}

/**
 * Makes a booted systemd node (its files by writeSystemdNodeFiles) a node of the cluster: waits for its containerd,
 * imports the images nothing may pull (the sandbox under kubeadm's name), then runs `kubeadm join` in it, which stops
 * the kubelet unit, writes its configuration and starts it with systemctl, and waits for its TLS bootstrap. What is
 * run, and what it said, is appended to `log` (this machine's path); a failure quotes its last lines.
 */
export async function joinSystemdNode(o: {
  pid: number;
  node: string;
  images: SystemdNodeImage[];
  log: string;
  clock: Clock;
  timeoutMs?: number;
}): Promise<void> {
  const step = async (argv: string[], timeoutMs = 120_000) => {
    await appendFile(o.log, `$ ${argv.join(' ')}\n`);
    const r = await inSystemdNode(o.pid, argv, timeoutMs);
    await appendFile(o.log, `${r.stdout}${r.stderr}`);
    if (r.code !== 0)
      throw new KrError('LAB_KUBEADM_FAILED', `${argv.slice(0, 2).join(' ')} on ${o.node} failed (exit ${r.code}); its log: ${o.log}`, {
        exit: EXIT.failed,
        details: lastLines(`${r.stdout}${r.stderr}`, 15),
      });
  };
  const deadline = o.clock.now() + 60_000;
  while ((await inSystemdNode(o.pid, ['ctr', 'version'], 10_000)).code !== 0) {
    if (o.clock.now() > deadline)
      throw new KrError('LAB_KUBEADM_FAILED', `containerd on ${o.node} did not answer within 60s (journalctl -u containerd on the node)`);
    await o.clock.sleep(500);
  }
  const ctr = ['ctr', '--namespace', 'k8s.io', 'images'];
  for (const img of o.images) {
    await step([...ctr, 'import', '--base-name', img.ref.slice(0, img.ref.lastIndexOf(':')), img.archive]);
    for (const tag of img.tags) await step([...ctr, 'tag', '--force', img.ref, tag]);
  }
  await step(['kubeadm', 'join', '--config', SYSTEMD_NODE_JOIN_CONFIG], o.timeoutMs ?? 300_000);
}
