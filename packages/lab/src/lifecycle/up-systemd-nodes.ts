import { mkdir, readFile, rm, writeFile } from 'node:fs/promises';
import { existsSync } from 'node:fs';
import { basename, dirname, join } from 'node:path';
import { shq } from 'kube-runbook/internal/core/shell.js';
import { mustSh } from '../host/host.js';
import { labNames, labSshFiles } from '../host/paths.js';
import type { LabNodeInfo } from '../host/info.js';
import { bootSystemdNode, systemdNodePaths, type SystemdNode } from '../host/systemd-node.js';
import { APISERVER_PORT } from './components.js';
import { caCertHash } from './kubeadm-config.js';
import { realPodCidr } from './real-node-config.js';
import { joinSystemdNode } from './systemd-node-join.js';
import { systemdNodeSocket, writeSystemdNodeFiles } from './systemd-node-units.js';
import { component, type LabComponent } from './up-component.js';
import { pauseName } from './up-kubeadm.js';
import type { LabPlan } from './up-plan.js';

/** Where the release's binaries and the images are in a node whose PID 1 is systemd (read-only binds). */
const IN_NODE = {
  kubernetes: '/opt/kube-runbook/kubernetes',
  containerd: '/opt/kube-runbook/containerd',
  cni: '/opt/cni/bin',
  images: '/opt/kube-runbook/images',
} as const;

/** The log of a node's `kubeadm join` (and its image imports), beside its console in its directory. */
const joinLog = (n: LabNodeInfo) => join(n.systemd!.dir, 'kubeadm-join.log');

/** How the node boots, from what `lab up` recorded of it (LabInfo). */
export function systemdNodeOf(instance: string, n: LabNodeInfo): SystemdNode {
  const s = n.systemd;
  if (!s?.rootfs) throw new Error(`${n.name} is no node whose PID 1 is systemd`);
  return {
    name: n.name,
    cgroup: labNames(instance).nodeCgroup(n.name),
    netns: n.netns,
    rootfs: s.rootfs,
    dir: s.dir,
    ...(s.binds ? { binds: s.binds } : {}),
  };
}

/**
 * Workers sd-1..N whose PID 1 is systemd (`--systemd-nodes`): each boots on an overlay of the cached root filesystem
 * in a cgroup of the lab's (`lab down` finds it by name), on the lab's bridge, with kubeadm's packages' kubelet unit
 * and drop-in and containerd as units; `kubeadm join` in it makes it a node. sshd in each node takes the lab's key
 * and presents a host key made for that node alone, which the inventory's known_hosts lists: the executor reaches
 * these nodes over ssh with host keys checked, as it reaches a kubeadm cluster's machines.
 */
export function systemdNodes(p: LabPlan): LabComponent {
  const real = p.real;
  const nodes = p.systemdInfos;
  let sandbox = '';
  return component({
    name: `${nodes.map((n) => n.name).join(', ')} (systemd as PID 1) by kubeadm join`,
    async write() {
      if (!real?.kubeadm || !p.systemdRootfs)
        throw new Error('nodes whose PID 1 is systemd need kubeadm, the real nodes and the root filesystem');
      sandbox = await pauseName(real.kubeadm, p.bin.version);
      const ssh = labSshFiles(p.paths.stateDir);
      await mkdir(dirname(ssh.identityFile), { recursive: true, mode: 0o700 });
      if (!existsSync(ssh.identityFile))
        await mustSh(
          'LAB_SYSTEMD_NODE',
          'ssh-keygen',
          `ssh-keygen -q -t ed25519 -N '' -C ${shq(`kube-runbook-lab ${p.instance}`)} -f ${shq(ssh.identityFile)}`,
        );
      const publicKey = await readFile(`${ssh.identityFile}.pub`, 'utf8');
      const caHash = caCertHash(await readFile(p.pki.caCert, 'utf8'));
      const known: string[] = [];
      for (const [k, n] of nodes.entries()) {
        const s = n.systemd!;
        s.rootfs = p.systemdRootfs;
        s.binds = {
          [dirname(real.kubelet)]: IN_NODE.kubernetes,
          [real.containerd.dir]: IN_NODE.containerd,
          [real.cniBinDir]: IN_NODE.cni,
          [dirname(real.images.pause.archive)]: IN_NODE.images,
        };
        const upper = systemdNodePaths(s.dir).upper;
        await writeSystemdNodeFiles(upper, {
          node: n.name,
          ip: n.ip,
          ...(n.zone ? { zone: n.zone } : {}),
          kubernetesDir: IN_NODE.kubernetes,
          containerdDir: IN_NODE.containerd,
          sandboxImage: sandbox,
          podCidr: realPodCidr(251 + k),
          join: { instance: p.instance, apiserver: `${p.apiserverHost}:${APISERVER_PORT}`, caHash, cgroupV1: p.layout.version === 1 },
        });
        // root's key is the lab's; the node's host key is its own (the root filesystem's are shared by every node)
        await mkdir(join(upper, 'root/.ssh'), { recursive: true, mode: 0o700 });
        await writeFile(join(upper, 'root/.ssh/authorized_keys'), publicKey, { mode: 0o600 });
        const hostKey = join(upper, 'etc/ssh/ssh_host_ed25519_key');
        await mkdir(dirname(hostKey), { recursive: true });
        await rm(hostKey, { force: true });
        await rm(`${hostKey}.pub`, { force: true });
        await mustSh('LAB_SYSTEMD_NODE', 'ssh-keygen', `ssh-keygen -q -t ed25519 -N '' -C ${shq(n.name)} -f ${shq(hostKey)}`);
        await mkdir(join(upper, 'etc/ssh/sshd_config.d'), { recursive: true });
        await writeFile(join(upper, 'etc/ssh/sshd_config.d/kube-runbook.conf'), 'HostKey /etc/ssh/ssh_host_ed25519_key\n');
        const [type, key] = (await readFile(`${hostKey}.pub`, 'utf8')).split(' ');
        known.push(`${n.ip} ${type} ${key}`);
      }
      await writeFile(ssh.knownHostsFile, `${known.join('\n')}\n`, { mode: 0o644 });
    },
    async start() {
      p.step(`${nodes.map((n) => n.name).join(', ')}: systemd as PID 1, then kubeadm join`);
      await Promise.all(
        nodes.map(async (n) => {
          // a node forwards packets (kubeadm's preflight checks it): the setting is the node's network namespace's own
          await mustSh('LAB_SYSTEMD_NODE', `ip_forward on ${n.name}`, `ip netns exec ${shq(n.netns)} sysctl -qw net.ipv4.ip_forward=1`);
          const pid = await bootSystemdNode(systemdNodeOf(p.instance, n), { clock: p.clock });
          n.systemd!.pid = pid;
          n.runtime = { ctr: real!.containerd.ctr, socket: systemdNodeSocket(pid) };
          const archive = (a: string) => join(IN_NODE.images, basename(a));
          await joinSystemdNode({
            pid,
            node: n.name,
            images: [
              { archive: archive(real!.images.pause.archive), ref: real!.images.pause.ref, tags: [sandbox] },
              { archive: archive(real!.images.workload.archive), ref: real!.images.workload.ref, tags: [] },
            ],
            log: joinLog(n),
            clock: p.clock,
          });
        }),
      );
    },
  });
}
