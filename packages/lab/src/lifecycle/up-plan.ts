import { mkdir } from 'node:fs/promises';
import { join } from 'node:path';
import type { Clock } from 'kube-runbook/internal/core/clock.js';
import type { Logger } from 'kube-runbook/internal/core/logger.js';
import { KrError } from 'kube-runbook/internal/core/errors.js';
import { cgroupLayout, makeCgroup, type CgroupLayout } from '../host/cgroup.js';
import type * as comp from './components.js';
import { APISERVER_PORT, ETCD_PORT } from './components.js';
import { writeLabInfo, type LabBinariesInfo, type LabInfo, type LabNodeInfo } from '../host/info.js';
import { writeKubeconfig } from '../host/kubeconfig.js';
import { makeBridge, makeNodesNet, nodeIp, SUBNET_BASE } from '../host/net.js';
import { labNames, labPaths, LB_NODE, OTEL_NODE, PROMETHEUS_NODE, type LabNames, type LabPaths } from '../host/paths.js';
import { makePki, type LabPki } from '../host/pki.js';
import { prometheusUrl } from './prometheus.js';
import { controlPlaneNodes, zoneOf, type LabSettings } from '../host/settings.js';
import type { RealNodeBinaries } from '../install/real-nodes.js';
import type { ControlPlaneImages } from '../install/control-plane-images.js';
import type { OtelcolBinary } from '../install/otelcol.js';
import { freePort, otelEndpoint, otelFile } from './otel.js';

/** What `lab up` was given: the instance, its settings and what was installed for it. */
export interface LabUpInputs {
  instance: string;
  settings: LabSettings;
  bin: LabBinariesInfo;
  /** The simulator's entry point in the build. */
  simScript: string;
  clock: Clock;
  log: Logger;
  signal?: AbortSignal;
  readyTimeoutMs?: number;
  /** Real nodes' binaries (with `--real-nodes`). */
  real?: RealNodeBinaries;
  /** The root filesystem nodes whose PID 1 is systemd boot on (with `--systemd-nodes`). */
  systemdRootfs?: string;
  /** The control plane's images (with `--static-pods`). */
  cpImages?: ControlPlaneImages;
  /** The OTLP receiver (with `--otel`). */
  otelcol?: OtelcolBinary;
}

type Credentials = { certFile: string; keyFile: string } | { token: string };

/** What every component of a lab is planned from: its nodes and addresses, its certificates, its LabInfo. */
export interface LabPlan extends LabUpInputs {
  names: LabNames;
  paths: LabPaths;
  layout: CgroupLayout;
  info: LabInfo;
  /** The control-plane members; cp: the first. */
  cps: LabNodeInfo[];
  cp: LabNodeInfo;
  /** The load balancer of an HA lab. */
  lb?: LabNodeInfo;
  prom?: { node: string; netns: string; ip: string };
  otel?: { instance: string; dir: string; host: string; port: number; binary: string };
  /** Simulated and real workers, by name. */
  workers: string[];
  realWorkers: string[];
  realInfos: LabNodeInfo[];
  /** Workers whose PID 1 is systemd (sd-1..N), joined by kubeadm after the real workers. */
  systemdInfos: LabNodeInfo[];
  /** With `--static-pods`: cp-1, a real node whose kubelet runs the control plane from kubeadm's manifests. */
  staticCp?: LabNodeInfo;
  /** The control-plane members that are real nodes: cp-1 with `--static-pods`, every member with `--kubeadm`. */
  cpKubelets: LabNodeInfo[];
  /** The VIP of an HA lab (the load balancer's address), else the apiserver's. */
  apiserverHost: string;
  pki: LabPki;
  members: { name: string; ip: string }[];
  /** Writes a kubeconfig of the lab for `name` with `user`, to the VIP unless `server` says otherwise. */
  kubeconfig(name: string, user: Credentials, file: string, server?: string): Promise<void>;
  /** What a control-plane member's components are written from. */
  componentsOf(m: LabNodeInfo): comp.ComponentContext;
  /** When `up` began (clock ms). */
  started: number;
  /** Logs a step with the time since `up` began. */
  step(what: string): void;
}

/**
 * Plans the lab and makes what every component stands on: the bridge and the nodes' namespaces and veths, the etcd
 * cgroup, the certificates, tokens and keys, the admin kubeconfigs, and LabInfo (phase `starting`).
 */
export async function planLab(i: LabUpInputs): Promise<LabPlan> {
  const { instance, settings, clock, log } = i;
  const started = clock.now();
  const names = labNames(instance);
  const paths = labPaths(instance);
  const step = (what: string) => log.info(`${what} (${((clock.now() - started) / 1000).toFixed(1)}s)`);
  const layout = cgroupLayout();
  if (!layout) throw new KrError('LAB_NO_CGROUP', 'no blkio (cgroup v1) or unified (cgroup v2) hierarchy under /sys/fs/cgroup');
  await mkdir(paths.stateDir, { recursive: true, mode: 0o755 });

  step('network');
  const third = await makeBridge(names);
  const ha = (settings.controlPlanes ?? 1) > 1;
  const workers = Array.from({ length: settings.nodes }, (_, n) => `node-${n + 1}`);
  const realWorkers = Array.from({ length: settings.realNodes ?? 0 }, (_, n) => `rnode-${n + 1}`);
  const at = (name: string) => ({ name, netns: names.netns(name), ip: nodeIp(third, name) });
  const cps: LabNodeInfo[] = controlPlaneNodes(settings).map((n) => ({ ...at(n), roles: ['control-plane', 'etcd'] }));
  const lb: LabNodeInfo | undefined = ha ? { ...at(LB_NODE), roles: ['load-balancer'] } : undefined;
  const prom = settings.prometheus
    ? { node: PROMETHEUS_NODE, netns: names.netns(PROMETHEUS_NODE), ip: nodeIp(third, PROMETHEUS_NODE) }
    : undefined;
  const nodes: LabNodeInfo[] = [
    ...cps,
    ...workers.map((n, k) => ({ ...at(n), zone: zoneOf(k + 1, settings.zones), roles: ['worker' as const] })),
    ...realWorkers.map((n, k) => ({
      ...at(n),
      zone: zoneOf(workers.length + k + 1, settings.zones),
      roles: ['worker' as const],
      real: true,
    })),
    ...Array.from({ length: settings.systemdNodes ?? 0 }, (_, k) => `sd-${k + 1}`).map((n, k) => ({
      ...at(n),
      zone: zoneOf(workers.length + realWorkers.length + k + 1, settings.zones),
      roles: ['worker' as const],
      systemd: { dir: join(paths.nodesDir, n, 'systemd') },
    })),
    ...(lb ? [lb] : []),
  ];
  const cp = cps[0]!;
  // the VIP of an HA lab is the load balancer's address: kubelets and the kubeconfig go through it
  const apiserverHost = lb?.ip ?? cp.ip;
  // the OTLP receiver listens on the lab's address on this machine (the bridge's), where runs here and in the lab reach it
  const otelHost = `${SUBNET_BASE}.${third}.1`;
  const otel = i.otelcol
    ? { instance, dir: paths.serviceDir(OTEL_NODE, 'otelcol'), host: otelHost, port: await freePort(otelHost), binary: i.otelcol.binary }
    : undefined;
  const shared = { names, paths, layout, cps, apiserverHost, ...(prom ? { prom } : {}), ...(otel ? { otel } : {}) };
  const info = describeLab({ ...i, ...shared, third, nodes });
  await writeLabInfo(info);
  const netNodes = [...nodes, ...(prom ? [{ name: prom.node, netns: prom.netns, ip: prom.ip }] : [])];
  await makeNodesNet(names, {
    subnet: info.subnet,
    gateway: `${SUBNET_BASE}.${third}.1`,
    nodes: netNodes.map((n) => ({ ...n, veth: names.veth(n.name) })),
  });
  await makeCgroup(layout, names.cgroup);

  step('certificates, tokens and service-account keys');
  const realInfos = nodes.filter((n) => n.real);
  // --static-pods: cp-1 is a real node too, its kubelet running the control plane from kubeadm's manifests
  const staticCp = i.cpImages ? cp : undefined;
  // --kubeadm: every member is a real node (cp-1 by kubeadm init, the others by kubeadm join --control-plane)
  const cpKubelets = staticCp ? (settings.kubeadm ? cps : [staticCp]) : [];
  const pki = await makePki(paths.pkiDir, {
    instance,
    apiserverIps: [apiserverHost, ...cps.map((m) => m.ip)],
    nodes: [...cpKubelets.map((n) => n.name), ...workers, ...realWorkers],
    prometheus: Boolean(prom),
    kubelets: [...cpKubelets, ...realInfos].map((n) => ({ name: n.name, ip: n.ip })),
  });
  const members = cps.map((m) => ({ name: m.name, ip: m.ip }));
  const kubeconfig = (name: string, user: Credentials, file: string, server = info.apiserverUrl) =>
    writeKubeconfig(file, { context: names.context, server, caFile: pki.caCert, userName: `${names.context}-${name}`, user });
  await kubeconfig('admin', { certFile: pki.cert('admin'), keyFile: pki.key('admin') }, paths.kubeconfig);
  // an executor that must see the cluster while the VIP is down (load-balancer-outage) talks to one member directly
  for (const m of info.members ?? [])
    await kubeconfig('admin', { certFile: pki.cert('admin'), keyFile: pki.key('admin') }, m.kubeconfig, m.apiserverUrl);
  // what a control-plane member's components are written from; the first member's also serves the workers' kubelets
  const componentsOf = (m: LabNodeInfo): comp.ComponentContext => ({
    instance,
    cpNode: m.name,
    cpNetns: m.netns,
    cpIp: m.ip,
    members,
    serviceDir: paths.serviceDir,
    pki,
    bin: i.bin,
    settings,
    etcdCgroup: { dir: info.etcdCgroup, version: layout.version, name: names.cgroup, options: 'blkio' },
  });
  return {
    ...i,
    ...shared,
    info,
    cp,
    ...(lb ? { lb } : {}),
    workers,
    realWorkers,
    realInfos,
    systemdInfos: nodes.filter((n) => n.systemd),
    ...(staticCp ? { staticCp } : {}),
    cpKubelets,
    pki,
    members,
    kubeconfig,
    componentsOf,
    started,
    step,
  };
}

/** The lab's LabInfo while it starts (phase `starting`): its addresses, nodes, files and settings. */
function describeLab(d: {
  instance: string;
  settings: LabSettings;
  bin: LabBinariesInfo;
  clock: Clock;
  otelcol?: OtelcolBinary;
  names: LabNames;
  paths: LabPaths;
  layout: CgroupLayout;
  third: number;
  cps: LabNodeInfo[];
  nodes: LabNodeInfo[];
  apiserverHost: string;
  prom?: { node: string; netns: string; ip: string };
  otel?: { dir: string; host: string; port: number };
}): LabInfo {
  const { instance, paths, names, settings, cps, nodes, prom, otel, layout, third } = d;
  const cp = cps[0]!;
  const ha = cps.length > 1;
  // kubeadm's etcd serves its clients over TLS only
  const etcdUrl = (ip: string) => `${settings.kubeadm ? 'https' : 'http'}://${ip}:${ETCD_PORT}`;
  return {
    instance,
    stateDir: paths.stateDir,
    kubeconfig: paths.kubeconfig,
    context: names.context,
    inventoryFile: paths.inventoryFile,
    apiserverUrl: `https://${d.apiserverHost}:${APISERVER_PORT}`,
    etcdUrl: etcdUrl(cp.ip),
    ...(ha
      ? {
          members: cps.map((m) => ({
            name: m.name,
            apiserverUrl: `https://${m.ip}:${APISERVER_PORT}`,
            etcdUrl: etcdUrl(m.ip),
            kubeconfig: join(paths.stateDir, `kubeconfig-${m.name}`),
          })),
        }
      : {}),
    ...(prom ? { prometheus: { url: prometheusUrl(prom.ip), ...prom } } : {}),
    ...(otel && d.otelcol ? { otel: { endpoint: otelEndpoint(otel), file: otelFile(otel.dir), version: d.otelcol.version } } : {}),
    nodes,
    settings,
    phase: 'starting',
    subnet: `${SUBNET_BASE}.${third}.0/24`,
    bridge: names.bridge,
    chain: names.chain,
    etcdCgroup: join(layout.root, names.cgroup),
    etcdDataDir: join(paths.serviceDir('cp-1', 'etcd'), 'data'),
    binaries: d.bin,
    createdAt: new Date(d.clock.now()).toISOString(),
  };
}
