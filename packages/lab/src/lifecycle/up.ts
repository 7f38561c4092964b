import { existsSync } from 'node:fs';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { realClock, type Clock } from 'kube-runbook/internal/core/clock.js';
import { silentLogger, type Logger } from 'kube-runbook/internal/core/logger.js';
import { EXIT, KrError, messageOf } from 'kube-runbook/internal/core/errors.js';
import { shq } from 'kube-runbook/internal/core/shell.js';
import { logTails } from './control.js';
import { findLabBinaries, parseLabVersion } from '../install/binaries.js';
import { missingLabTools } from '../install/ensure.js';
import { labDown } from './down.js';
import { sh } from '../host/host.js';
import { writeLabInfo, type LabBinariesInfo, type LabInfo } from '../host/info.js';
import { writeInventory } from './inventory.js';
import { withLock } from '../host/lock.js';
import { labNames, labPaths, machineRunDir, DEFAULT_INSTANCE, cacheDir } from '../host/paths.js';
import { resolveSettings, type LabUpOptions } from '../host/settings.js';
import { checkRealNodes } from './real-nodes.js';
import { ensureRealNodeBinaries, type RealNodeBinaries } from '../install/real-nodes.js';
import { ensureControlPlaneImages, type ControlPlaneImages } from '../install/control-plane-images.js';
import { ensureOtelcol } from '../install/otelcol.js';
import { distroMirror } from '../install/apt.js';
import { ensureSystemdRootfs } from '../install/systemd-rootfs.js';
import type { LabComponent } from './up-component.js';
import { controlPlaneServices, staticControlPlane } from './up-control-plane.js';
import { otelCollector, haproxy, prometheus } from './up-extras.js';
import { kubeadmControlPlane, kubeadmWorkers } from './up-kubeadm.js';
import { realNodes, simulatedNodes, workload } from './up-nodes.js';
import { systemdNodes } from './up-systemd-nodes.js';
import { planLab, type LabPlan, type LabUpInputs } from './up-plan.js';

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
  if (settings.kubeadm && release.minor === 20)
    throw new KrError(
      'LAB_BAD_OPTION',
      '--kubeadm runs on Kubernetes 1.37 and 1.34 (the lab builds kubeadm and a real kubelet for those); this lab would run 1.20',
      { exit: EXIT.invalid },
    );
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
    real = await ensureRealNodeBinaries({ log: o.log ?? silentLogger, clock: o.clock, signal: o.signal, kubeadm: settings.kubeadm }, bin);
    if (settings.staticPods) cpImages = await ensureControlPlaneImages({ log: o.log ?? silentLogger, signal: o.signal }, cacheDir(), bin);
  }
  // nodes whose PID 1 is systemd boot on a root filesystem built once into the cache (a fresh machine builds it here)
  const systemdRootfs = settings.systemdNodes
    ? (await ensureSystemdRootfs({ log: o.log ?? silentLogger, clock: o.clock, signal: o.signal, ...(await distroMirror()) })).dir
    : undefined;
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
      const log = o.log ?? silentLogger;
      const clock = o.clock ?? realClock;
      return await up({
        instance,
        settings,
        bin,
        simScript: sim,
        clock,
        log,
        signal: o.signal,
        readyTimeoutMs: o.readyTimeoutMs,
        real,
        cpImages,
        otelcol,
        systemdRootfs,
      });
    } catch (e) {
      const details = await logTails(instance, settings);
      if (!o.keepOnFailure) await labDown(instance, { locked: true, log: silentLogger }).catch(() => {});
      if (e instanceof KrError) throw new KrError(e.code, e.message, { exit: e.exit, details: [...e.details, ...details], cause: e });
      throw new KrError('LAB_UP_FAILED', `lab up failed: ${messageOf(e)}`, { details, cause: e });
    }
  });
}

/** Plans the lab, writes every component's files and the inventory, then starts each component in turn. */
async function up(inputs: LabUpInputs): Promise<LabInfo> {
  const p = await planLab(inputs);
  const parts = await labComponents(p);
  for (const c of parts) await c.write();
  await writeInventory(p.paths.inventoryFile, p.info);
  for (const c of parts) {
    await c.start();
    await c.ready();
  }
  p.info.phase = 'up';
  p.info.upSeconds = Math.round((p.clock.now() - p.started) / 100) / 10;
  await writeLabInfo(p.info);
  p.step(`lab ${p.instance} is up`);
  return p.info;
}

/** The components of the lab `p` plans, in the order they start. */
async function labComponents(p: LabPlan): Promise<LabComponent[]> {
  const kubeadm = p.settings.kubeadm;
  const [etcd, apiserver, controllers] = kubeadm
    ? [kubeadmControlPlane(p)]
    : p.staticCp
      ? [staticControlPlane(p)]
      : await controlPlaneServices(p);
  // kubeadm's HA control plane is made through the VIP (its controlPlaneEndpoint): HAProxy comes first, and kubeadm's
  // control plane waits for every backend UP once the last member has joined
  return [
    ...(p.lb && kubeadm ? [haproxy(p, { waitBackends: false })] : []),
    ...(etcd ? [etcd] : []),
    ...(apiserver ? [apiserver] : []),
    ...(p.lb && !kubeadm ? [haproxy(p)] : []),
    ...(controllers ? [controllers] : []),
    simulatedNodes(p),
    ...(p.real ? [kubeadm ? kubeadmWorkers(p) : realNodes(p)] : []),
    ...(p.systemdInfos.length ? [systemdNodes(p)] : []),
    workload(p),
    ...(p.prom ? [prometheus(p)] : []),
    ...(p.otel ? [otelCollector(p)] : []),
  ];
}
