import { existsSync } from 'node:fs';
import { mkdir, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { defaultAgentImage } from 'kube-runbook/internal/inventory/schema.js';
import { CoreV1Api, KubeConfig, PatchStrategy, setHeaderOptions } from '@kubernetes/client-node';
import { realClock, type Clock } from 'kube-runbook/internal/core/clock.js';
import { silentLogger, type Logger } from 'kube-runbook/internal/core/logger.js';
import { EXIT, KrError, messageOf } from 'kube-runbook/internal/core/errors.js';
import { shq } from 'kube-runbook/internal/core/shell.js';
import { logTails, start, startAndWait } from './control.js';
import { eachLimited } from 'kube-runbook/internal/core/each-limited.js';
import { findLabBinaries, parseLabVersion } from '../install/binaries.js';
import { missingLabTools } from '../install/ensure.js';
import { cgroupLayout, makeCgroup } from '../host/cgroup.js';
import { CONTROL_PLANE_SERVICES, makeComponentCgroups } from '../host/component-cgroup.js';
import { hierarchies } from '../host/node-cgroup.js';
import * as comp from './components.js';
import { labDown } from './down.js';
import { sh } from '../host/host.js';
import { writeLabInfo, type LabBinariesInfo, type LabInfo, type LabNodeInfo } from '../host/info.js';
import { writeInventory } from './inventory.js';
import { writeKubeconfig } from '../host/kubeconfig.js';
import { withLock } from '../host/lock.js';
import { productCli } from '../host/product.js';
import { makeBridge, makeNodesNet, nodeIp, SUBNET_BASE } from '../host/net.js';
import { labNames, labPaths, machineRunDir, DEFAULT_INSTANCE, LB_NODE, PROMETHEUS_NODE } from '../host/paths.js';
import { makePki } from '../host/pki.js';
import { writeService, type ServiceSpec } from './services.js';
import { haproxyService, parseShowStat, statsCommand, writeHaproxyConfig } from './haproxy.js';
import { findPackagedBinary } from '../install/packaged.js';
import { prometheusService, prometheusUrl, writePrometheusConfig, type PrometheusPlan } from './prometheus.js';
import { startPrometheus } from './prometheus-start.js';
import { controlPlaneNodes, resolveSettings, zoneOf, type LabSettings, type LabUpOptions } from '../host/settings.js';
import { podCidrOf } from '../sim/objects.js';
import type { KubeletSimFile } from '../sim/types.js';
import { createWorkload, waitReady, waitServiceAccount } from './workload.js';
import { checkRealNodes, startRealNodes, writeRealNodes, type RealNode } from './real-nodes.js';
import { realNodePaths } from './real-node-config.js';
import { ensureRealNodeBinaries, type RealNodeBinaries } from '../install/real-nodes.js';
import { WORKLOAD_IMAGE } from '../install/images.js';
import { cacheDir, instanceRunDir } from '../host/paths.js';
import { ensureControlPlaneImages, type ControlPlaneImages } from '../install/control-plane-images.js';
import { kubernetesDir, manifestsDir, writeStaticPods } from './static-pods.js';
import { httpGet } from './services.js';
import { ensureOtelcol, type OtelcolBinary } from '../install/otelcol.js';
import { freePort, otelEndpoint, otelFile, otelService, writeOtelConfig } from './otel.js';
import { OTEL_NODE } from '../host/paths.js';

export interface LabUpRunOptions extends LabUpOptions {
  log?: Logger;
  clock?: Clock;
  signal?: AbortSignal;
  /** Binaries to use (else `--bin-dir`, KUBEBUILDER_ASSETS or the cache). */
  binaries?: LabBinariesInfo;
  binDir?: string;
  /** 1.37 (default), 1.34, 1.20, or an exact patch release of the first two; from the cache `lab install` fills. */
  kubernetesVersion?: string;
  /** Leave what was made when `up` fails (default: clean it up, after quoting the components' logs). */
  keepOnFailure?: boolean;
  /** How long to wait for nodes and pods (default 120s). */
  readyTimeoutMs?: number;
}

/** The simulator's entry point in the build (`npm run build`); the CLI builds nothing at run time. */
function simulatorScript(): string {
  return fileURLToPath(new URL('../../dist/sim/kubelet-sim.js', import.meta.url));
}

/**
 * Starts a lab: namespaces and network, certificates, etcd in its own cgroup, the real apiserver,
 * controller-manager and scheduler, simulated kubelets (a forwarder per node, a process per group of nodes) and the
 * sample workload, and with `prometheus` Prometheus scraping the control plane. Returns when every node is Ready,
 * every pod runs and Prometheus scrapes every component.
 */
export async function labUp(o: LabUpRunOptions = {}): Promise<LabInfo> {
  const instance = o.instance ?? DEFAULT_INSTANCE;
  const settings = resolveSettings(o);
  labNames(instance);
  if (process.platform !== 'linux' || process.getuid?.() !== 0)
    throw new KrError(
      'LAB_NEEDS_ROOT',
      'the lab runs as root on Linux (it makes network namespaces, veths, an iptables chain and a cgroup)',
      {
        exit: EXIT.refused,
      },
    );
  const sim = simulatorScript();
  if (!existsSync(sim)) throw new KrError('LAB_NOT_BUILT', `${sim} is missing; run \`npm run build\` first`, { exit: EXIT.refused });
  const release = parseLabVersion(o.kubernetesVersion);
  if (settings.staticPods && release.minor === 20)
    throw new KrError(
      'LAB_BAD_OPTION',
      '--static-pods runs on Kubernetes 1.37 and 1.34 (a real kubelet of the release); this lab would run 1.20',
      { exit: EXIT.invalid },
    );
  const bin = o.binaries ?? (await findLabBinaries({ binDir: o.binDir, log: o.log, release: o.binDir ? undefined : release }));
  if (!bin) {
    const v = o.kubernetesVersion ?? `1.${release.minor}`;
    throw new KrError(
      'LAB_BINARIES_MISSING',
      `no Kubernetes ${v} binaries; run \`kube-runbook-lab install --kubernetes-version ${v}\` first (about 10 minutes once)`,
      {
        exit: EXIT.refused,
      },
    );
  }
  if (!bin.etcd) throw new KrError('LAB_BINARIES_MISSING', 'etcd is not installed; run `kube-runbook-lab install`', { exit: EXIT.refused });
  const tools = await missingLabTools();
  if (tools.length)
    throw new KrError('LAB_TOOLS_MISSING', `${tools.join(', ')} not found; run \`kube-runbook-lab install\``, { exit: EXIT.refused });
  // real nodes: what the machine lacks is said before anything is built or made; their binaries are built once
  let real: RealNodeBinaries | undefined;
  let cpImages: ControlPlaneImages | undefined;
  if (settings.realNodes) {
    await checkRealNodes();
    real = await ensureRealNodeBinaries({ log: o.log ?? silentLogger, clock: o.clock, signal: o.signal }, bin);
    if (settings.staticPods) cpImages = await ensureControlPlaneImages({ log: o.log ?? silentLogger, signal: o.signal }, cacheDir(), bin);
  }
  // the OTLP receiver: built once into the cache (a fresh machine builds it here, saying so)
  const otelcol = settings.otel
    ? await ensureOtelcol({ log: o.log ?? silentLogger, clock: o.clock, signal: o.signal }, cacheDir())
    : undefined;
  return withLock(join(machineRunDir(), `lab-${instance}.lock`), async () => {
    const paths = labPaths(instance);
    // a static-pod lab's cp-1 runs a kubelet rather than an apiserver service
    const running = async (svc: string) => (await sh(shq(join(paths.serviceDir('cp-1', svc), 'health')))).code === 0;
    if (existsSync(paths.infoFile) && ((await running('kube-apiserver')) || (await running('kubelet'))))
      throw new KrError('LAB_ALREADY_UP', `lab ${instance} is already up; \`kube-runbook-lab down --instance ${instance}\` first`, {
        exit: EXIT.refused,
      });
    await labDown(instance, { locked: true, log: silentLogger });
    try {
      return await up(instance, settings, bin, sim, o, real, cpImages, otelcol);
    } catch (e) {
      const details = await logTails(instance, settings);
      if (!o.keepOnFailure) await labDown(instance, { locked: true, log: silentLogger }).catch(() => {});
      if (e instanceof KrError) throw new KrError(e.code, e.message, { exit: e.exit, details: [...e.details, ...details], cause: e });
      throw new KrError('LAB_UP_FAILED', `lab up failed: ${messageOf(e)}`, { details, cause: e });
    }
  });
}

async function up(
  instance: string,
  settings: LabSettings,
  bin: LabBinariesInfo,
  simScript: string,
  o: LabUpRunOptions,
  real?: RealNodeBinaries,
  cpImages?: ControlPlaneImages,
  otelcol?: OtelcolBinary,
): Promise<LabInfo> {
  const clock = o.clock ?? realClock;
  const log = o.log ?? silentLogger;
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
  const workers = Array.from({ length: settings.nodes }, (_, i) => `node-${i + 1}`);
  const realWorkers = Array.from({ length: settings.realNodes ?? 0 }, (_, i) => `rnode-${i + 1}`);
  const cps: LabNodeInfo[] = controlPlaneNodes(settings).map((n) => ({
    name: n,
    netns: names.netns(n),
    ip: nodeIp(third, n),
    roles: ['control-plane', 'etcd'],
  }));
  const lb: LabNodeInfo | undefined = ha
    ? { name: LB_NODE, netns: names.netns(LB_NODE), ip: nodeIp(third, LB_NODE), roles: ['load-balancer'] }
    : undefined;
  const prom = settings.prometheus
    ? { node: PROMETHEUS_NODE, netns: names.netns(PROMETHEUS_NODE), ip: nodeIp(third, PROMETHEUS_NODE) }
    : undefined;
  const nodes: LabNodeInfo[] = [
    ...cps,
    ...workers.map((n, i) => ({
      name: n,
      netns: names.netns(n),
      ip: nodeIp(third, n),
      zone: zoneOf(i + 1, settings.zones),
      roles: ['worker' as const],
    })),
    ...realWorkers.map((n, i) => ({
      name: n,
      netns: names.netns(n),
      ip: nodeIp(third, n),
      zone: zoneOf(workers.length + i + 1, settings.zones),
      roles: ['worker' as const],
      real: true,
    })),
    ...(lb ? [lb] : []),
  ];
  const cp = cps[0]!;
  // the VIP of an HA lab is the load balancer's address: kubelets and the kubeconfig go through it
  const apiserverHost = lb?.ip ?? cp.ip;
  // the OTLP receiver listens on the lab's address on this machine (the bridge's), where runs here and in the lab reach it
  const otel = otelcol
    ? await (async () => {
        const host = `${SUBNET_BASE}.${third}.1`;
        return { instance, dir: paths.serviceDir(OTEL_NODE, 'otelcol'), host, port: await freePort(host), binary: otelcol.binary };
      })()
    : undefined;
  const info: LabInfo = {
    instance,
    stateDir: paths.stateDir,
    kubeconfig: paths.kubeconfig,
    context: names.context,
    inventoryFile: paths.inventoryFile,
    apiserverUrl: `https://${apiserverHost}:${comp.APISERVER_PORT}`,
    etcdUrl: `http://${cp.ip}:${comp.ETCD_PORT}`,
    ...(ha
      ? {
          members: cps.map((m) => ({
            name: m.name,
            apiserverUrl: `https://${m.ip}:${comp.APISERVER_PORT}`,
            etcdUrl: `http://${m.ip}:${comp.ETCD_PORT}`,
            kubeconfig: join(paths.stateDir, `kubeconfig-${m.name}`),
          })),
        }
      : {}),
    ...(prom ? { prometheus: { url: prometheusUrl(prom.ip), ...prom } } : {}),
    ...(otel && otelcol ? { otel: { endpoint: otelEndpoint(otel), file: otelFile(otel.dir), version: otelcol.version } } : {}),
    nodes,
    settings,
    phase: 'starting',
    subnet: `${SUBNET_BASE}.${third}.0/24`,
    bridge: names.bridge,
    chain: names.chain,
    etcdCgroup: join(layout.root, names.cgroup),
    etcdDataDir: join(paths.serviceDir('cp-1', 'etcd'), 'data'),
    binaries: bin,
    createdAt: new Date(clock.now()).toISOString(),
  };
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
  const staticCp = cpImages ? cp : undefined;
  const pki = await makePki(paths.pkiDir, {
    instance,
    apiserverIps: [apiserverHost, ...cps.map((m) => m.ip)],
    nodes: [...(staticCp ? [staticCp.name] : []), ...workers, ...realWorkers],
    prometheus: Boolean(prom),
    kubelets: [...(staticCp ? [staticCp] : []), ...realInfos].map((n) => ({ name: n.name, ip: n.ip })),
  });
  const members = cps.map((m) => ({ name: m.name, ip: m.ip }));
  const kc = (name: string, user: { certFile: string; keyFile: string } | { token: string }, file: string, server = info.apiserverUrl) =>
    writeKubeconfig(file, { context: names.context, server, caFile: pki.caCert, userName: `${names.context}-${name}`, user });
  await kc('admin', { certFile: pki.cert('admin'), keyFile: pki.key('admin') }, paths.kubeconfig);
  // an executor that must see the cluster while the VIP is down (load-balancer-outage) talks to one member directly
  for (const m of info.members ?? [])
    await kc('admin', { certFile: pki.cert('admin'), keyFile: pki.key('admin') }, m.kubeconfig, m.apiserverUrl);
  // what a control-plane member's components are written from; the first member's also serves the workers' kubelets
  const componentsOf = (m: LabNodeInfo): comp.ComponentContext => ({
    instance,
    cpNode: m.name,
    cpNetns: m.netns,
    cpIp: m.ip,
    members,
    serviceDir: paths.serviceDir,
    pki,
    bin,
    settings,
    etcdCgroup: { dir: info.etcdCgroup, version: layout.version, name: names.cgroup, options: 'blkio' },
  });
  let staticControllers: (() => Promise<string>) | undefined;
  const perMember: { etcd: ServiceSpec; apiserver: ServiceSpec; controllers: ServiceSpec[] }[] = [];
  const h = cpImages ? undefined : await hierarchies();
  for (const m of cps) {
    // each component of a member in a cpu cgroup of its own, as a static pod's container is: starve-cpu can limit it
    const cpuCgroups = cpImages ? undefined : await makeComponentCgroups(h, names.nodeCgroup(m.name), CONTROL_PLANE_SERVICES);
    const c = { ...componentsOf(m), cpuCgroups };
    const svc = {
      etcd: comp.etcdService(c),
      apiserver: comp.apiserverService(c),
      controllers: [comp.controllerManagerService(c), comp.schedulerService(c)],
    };
    if (cpImages) {
      // kubeadm's /etc/kubernetes of the member: its manifests and the components' kubeconfigs
      const k8s = kubernetesDir(join(paths.nodesDir, m.name));
      await writeStaticPods(c, cpImages, join(paths.nodesDir, m.name), ['etcd', 'kube-apiserver']);
      staticControllers = () => writeStaticPods(c, cpImages, join(paths.nodesDir, m.name), ['kube-controller-manager', 'kube-scheduler']);
      await kc(
        'admin',
        { certFile: pki.cert('admin'), keyFile: pki.key('admin') },
        join(k8s, 'admin.conf'),
        `https://${m.ip}:${comp.APISERVER_PORT}`,
      );
      await kc(
        'controller-manager',
        { certFile: pki.cert('controller-manager'), keyFile: pki.key('controller-manager') },
        join(k8s, 'controller-manager.conf'),
        `https://${m.ip}:${comp.APISERVER_PORT}`,
      );
      await kc(
        'scheduler',
        { certFile: pki.cert('scheduler'), keyFile: pki.key('scheduler') },
        join(k8s, 'scheduler.conf'),
        `https://${m.ip}:${comp.APISERVER_PORT}`,
      );
      continue;
    }
    for (const s of [svc.etcd, svc.apiserver, ...svc.controllers]) await writeService(s);
    // as on kubeadm, a member's controller-manager and scheduler talk to their own apiserver, not through the VIP
    const local = `https://${m.ip}:${comp.APISERVER_PORT}`;
    await kc(
      'controller-manager',
      { certFile: pki.cert('controller-manager'), keyFile: pki.key('controller-manager') },
      join(svc.controllers[0]!.dir, 'kubeconfig'),
      local,
    );
    await kc(
      'scheduler',
      { certFile: pki.cert('scheduler'), keyFile: pki.key('scheduler') },
      join(svc.controllers[1]!.dir, 'kubeconfig'),
      local,
    );
    perMember.push(svc);
  }
  const ctx0 = componentsOf(cp);
  let lbService: ServiceSpec | undefined;
  if (lb) {
    const haproxyBinary = await findPackagedBinary('haproxy', 'haproxy', { log, signal: o.signal });
    const plan = {
      instance,
      dir: paths.serviceDir(LB_NODE, 'haproxy'),
      netns: lb.netns,
      vip: lb.ip,
      caFile: pki.caCert,
      members,
      haproxyBinary,
    };
    lbService = haproxyService(plan);
    await writeService(lbService);
    await writeHaproxyConfig(plan);
  }
  let promPlan: PrometheusPlan | undefined;
  if (prom) {
    const binary = await findPackagedBinary('prometheus', 'prometheus', { log, signal: o.signal });
    promPlan = {
      instance,
      dir: paths.serviceDir(prom.node, 'prometheus'),
      netns: prom.netns,
      ip: prom.ip,
      caFile: pki.caCert,
      certFile: pki.cert('prometheus'),
      keyFile: pki.key('prometheus'),
      members,
      binary,
    };
    await writeService(prometheusService(promPlan));
    await writePrometheusConfig(promPlan);
  }
  if (otel) {
    await writeService(otelService(otel));
    await writeOtelConfig(otel);
  }
  // hundreds of nodes: their files written side by side
  await eachLimited([...nodes.filter((x) => x.roles.includes('worker') && !x.real).entries()], 16, async ([i, n]) => {
    const svc = comp.kubeletService(ctx0, n.name, n.netns, { host: apiserverHost, port: comp.APISERVER_PORT });
    await writeService(svc);
    await kc(n.name, { token: pki.tokens[`system:node:${n.name}`]! }, join(svc.dir, 'kubeconfig'));
    const cfg: KubeletSimFile = {
      name: n.name,
      zone: n.zone,
      region: 'lab',
      ip: n.ip,
      podCidr: podCidrOf(i + 1),
      leaseDurationMs: settings.leaseDuration,
      statusReportFrequencyMs: settings.nodeStatusReportFrequency,
      statusCheckMs: Math.min(settings.leaseRenewInterval, 10_000),
      kubeletVersion: `v${bin.version}`,
      kubeconfig: join(svc.dir, 'kubeconfig'),
      runtimeDir: paths.runtimeDir(n.name),
      heartbeatFile: join(svc.dir, 'heartbeat'),
      apiSocket: comp.apiSocketOf(svc.dir),
      netns: n.netns,
      // pods of the node agent's image run `kube-runbook agent` for real, as this CLI
      agent: {
        image: defaultAgentImage(),
        cli: [process.execPath, productCli()],
      },
    };
    await writeFile(join(svc.dir, 'config.json'), `${JSON.stringify(cfg, null, 2)}\n`);
  });
  const simGroups = await writeSimGroups(ctx0, paths.stateDir, workers, simScript);
  let realNodes: RealNode[] = [];
  let cpNodes: RealNode[] = [];
  if (real) {
    const runDir = instanceRunDir(instance);
    const rc = { instance, names, serviceDir: paths.serviceDir, runDir, pki, settings, apiserverUrl: info.apiserverUrl, bin: real };
    realNodes = await writeRealNodes(rc, realInfos);
    for (const r of realNodes) {
      const n = realInfos.find((x) => x.name === r.plan.node);
      if (n) n.runtime = { ctr: real.containerd.ctr, socket: realNodePaths(r.plan).socket };
    }
    if (staticCp && cpImages) {
      const manifests = manifestsDir(join(paths.nodesDir, staticCp.name));
      // its kubelet talks to its own apiserver, as kubeadm's kubelet.conf of a control-plane node does
      const cpServer = `https://${staticCp.ip}:${comp.APISERVER_PORT}`;
      cpNodes = await writeRealNodes(
        { ...rc, apiserverUrl: cpServer, firstIndex: 200, staticPods: { [staticCp.name]: { manifests, images: Object.values(cpImages) } } },
        [staticCp],
      );
      // its containerd holds the control plane's containers: `lab containers` and `lab status` read them there
      for (const r of cpNodes) staticCp.runtime = { ctr: real.containerd.ctr, socket: realNodePaths(r.plan).socket };
    }
  }
  await writeInventory(paths.inventoryFile, info);

  if (staticCp) {
    step(`${staticCp.name}: containerd, images and the kubelet, which starts etcd and kube-apiserver from their manifests`);
    await startRealNodes(cpNodes, { clock, log, signal: o.signal });
    await waitStaticControlPlane(staticCp.ip, pki.caCert, clock, o.signal);
    step(`${staticCp.name}: kube-controller-manager and kube-scheduler manifests`);
    await staticControllers?.();
  } else {
    step(ha ? `etcd (${cps.length} members)` : 'etcd');
    // the members of a new cluster wait for each other: start them all, then wait for each
    for (const s of perMember) await start(s.etcd.dir);
    for (const s of perMember) await startAndWait(s.etcd.dir, 30_000, clock, o.signal);
    step(ha ? `kube-apiserver (${cps.length})` : 'kube-apiserver');
    for (const s of perMember) await start(s.apiserver.dir);
    for (const s of perMember) await startAndWait(s.apiserver.dir, 120_000, clock, o.signal);
  }
  if (lbService) {
    step(`haproxy: the VIP ${apiserverHost}:${comp.APISERVER_PORT}`);
    await startAndWait(lbService.dir, 30_000, clock, o.signal);
  }
  step(staticCp ? 'kubelet simulators' : 'kube-controller-manager, kube-scheduler and kubelet simulators');
  if (!staticCp) for (const s of perMember) for (const x of s.controllers) await start(x.dir);
  // the nodes' forwarders (a few ms each), then the processes that simulate them, a group of nodes each
  await eachLimited(workers, 16, (n) => start(paths.serviceDir(n, 'kubelet')));
  for (const dir of simGroups) await start(dir);
  if (realNodes.length) {
    step(`real nodes: containerd, images and kubelet on ${realWorkers.join(', ')}`);
    await startRealNodes(realNodes, { clock, log, signal: o.signal });
  }
  const admin = new KubeConfig();
  admin.loadFromFile(paths.kubeconfig);
  if (settings.workload) {
    step(`sample workload (${settings.replicas} replicas in namespace demo)`);
    await createWorkload(
      admin,
      settings.replicas,
      clock,
      o.signal,
      realNodes.length ? WORKLOAD_IMAGE : undefined,
      staticCp ? [staticCp.name] : [],
    );
  }
  step(`waiting for ${workers.length + realWorkers.length} node(s) Ready and every pod running`);
  await waitServiceAccount(admin, 'default', clock, o.signal);
  await waitReady(admin, {
    nodes: [...(staticCp ? [staticCp.name] : []), ...workers, ...realWorkers],
    pods: settings.workload ? settings.replicas : 0,
    timeoutMs: o.readyTimeoutMs ?? 120_000,
    clock,
    signal: o.signal,
  });
  if (staticCp) {
    step(`${staticCp.name}: kubeadm's control-plane labels`);
    await markControlPlane(admin, staticCp.name);
  }
  if (lbService) {
    step('waiting for HAProxy to see every apiserver UP');
    await waitBackendsUp(join(lbService.dir, 'stats.sock'), cps.length, clock, o.signal);
  }
  if (promPlan && info.prometheus) {
    step(`prometheus: ${info.prometheus.url}, scraping the control plane`);
    const targets = await startPrometheus({ dir: promPlan.dir, url: info.prometheus.url, admin, clock, signal: o.signal });
    step(`prometheus scrapes ${targets} targets`);
  }
  if (otel && info.otel) {
    step(`OTLP receiver (OpenTelemetry Collector ${info.otel.version}): ${info.otel.endpoint}, writing ${info.otel.file}`);
    await startAndWait(otel.dir, 30_000, clock, o.signal);
  }
  info.phase = 'up';
  info.upSeconds = Math.round((clock.now() - started) / 100) / 10;
  await writeLabInfo(info);
  step(`lab ${instance} is up`);
  return info;
}

/** Until the static pods' etcd and apiserver answer (the kubelet starts them; images are local), at most 120 s. */
async function waitStaticControlPlane(ip: string, caFile: string, clock: Clock, signal?: AbortSignal): Promise<void> {
  const deadline = clock.now() + 120_000;
  const check = `${httpGet(`https://${ip}:${comp.APISERVER_PORT}/readyz`, { caFile })} | grep -qx ok`;
  for (;;) {
    if ((await sh(check)).code === 0) return;
    if (clock.now() > deadline) throw new KrError('LAB_START_FAILED', `the static pods' kube-apiserver on ${ip} was not ready within 120s`);
    await clock.sleep(500, signal);
  }
}

/**
 * What `kubeadm init phase mark-control-plane` does besides the taint (which the kubelet registered with): the
 * control-plane role label and the exclusion from external load balancers. A kubelet may not set
 * `node-role.kubernetes.io/*` labels on its own Node, so the admin does.
 */
async function markControlPlane(admin: KubeConfig, node: string): Promise<void> {
  const core = admin.makeApiClient(CoreV1Api);
  await core.patchNode(
    {
      name: node,
      body: {
        metadata: {
          labels: { 'node-role.kubernetes.io/control-plane': '', 'node.kubernetes.io/exclude-from-external-load-balancers': '' },
        },
      },
    },
    setHeaderOptions('Content-Type', PatchStrategy.MergePatch),
  );
}

/**
 * How many simulated nodes share a process: a group shares the runtime and the timers (a process per node cost far
 * more memory and start time: BENCHMARKS.md, the lab benchmarks), and a few groups still use both cores of a small machine.
 */
const NODES_PER_SIM_PROCESS = 64;

/** The `kubelet-sims` services that run the simulated nodes, `<state>/kubelet-sims/group-N/`: their directories. */
async function writeSimGroups(c: comp.ComponentContext, stateDir: string, workers: string[], simScript: string): Promise<string[]> {
  const dirs: string[] = [];
  for (let g = 0; g * NODES_PER_SIM_PROCESS < workers.length; g++) {
    const group = `group-${g + 1}`;
    const svc = comp.kubeletSimsService(c, join(stateDir, 'kubelet-sims', group), group, process.execPath, simScript);
    await writeService(svc);
    const members = workers.slice(g * NODES_PER_SIM_PROCESS, (g + 1) * NODES_PER_SIM_PROCESS);
    await writeFile(
      join(svc.dir, 'group.json'),
      `${JSON.stringify(
        members.map((n) => join(c.serviceDir(n, 'kubelet'), 'config.json')),
        null,
        2,
      )}\n`,
    );
    dirs.push(svc.dir);
  }
  return dirs;
}

/** Until HAProxy's health checks have every member's apiserver UP (the VIP serves from all of them), at most 60 s. */
async function waitBackendsUp(socket: string, members: number, clock: Clock, signal?: AbortSignal): Promise<void> {
  const deadline = clock.now() + 60_000;
  for (;;) {
    let last: string;
    try {
      const backends = parseShowStat(await statsCommand(socket, 'show stat'));
      if (backends.length === members && backends.every((b) => b.status === 'UP')) return;
      last = backends.map((b) => `${b.server} ${b.status} ${b.check}`).join(', ');
    } catch (e) {
      last = messageOf(e);
    }
    if (clock.now() > deadline) throw new KrError('LAB_UP_FAILED', `HAProxy does not see every apiserver UP within 60 s: ${last}`);
    await clock.sleep(500, signal);
  }
}
