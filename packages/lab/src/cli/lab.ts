import { type Command, InvalidArgumentError } from 'commander';
import { EXIT, quote } from 'kube-runbook/internal/core/errors.js';
import { realClock } from 'kube-runbook/internal/core/clock.js';
import { createLogger, type Logger } from 'kube-runbook/internal/core/logger.js';
import { shq } from 'kube-runbook/internal/core/shell.js';
import { parseDuration } from 'kube-runbook/internal/core/duration.js';
import { DEFAULT_MINOR, labDown, labStatus, labUp, readLabInfo, rebootLabNode, SUPPORTED_MINORS } from '../index.js';
import { labContainers, renderContainers } from '../lifecycle/containers.js';
import { installLab } from '../install/install.js';
import { ensureOtelcol } from '../install/otelcol.js';
import { ensureRealNodeBinaries } from '../install/real-nodes.js';
import { cacheDir } from '../host/paths.js';
import { runFleet } from '../sim/fleet.js';
import { fleetLine, renderStatus, upLine } from '../lifecycle/render.js';
import { describeSettings } from '../host/settings.js';
import { checkInstance, DEFAULT_INSTANCE } from '../host/paths.js';
import { out } from 'kube-runbook/internal/cli/output.js';
import type { Done, Register } from 'kube-runbook/internal/cli/types.js';

const num = (v: string) => {
  const n = Number(v);
  if (v.trim() === '' || !Number.isFinite(n)) throw new InvalidArgumentError(`expected a number (got ${quote(v)})`);
  return n;
};
const int = (v: string) => {
  const n = num(v);
  if (!Number.isInteger(n)) throw new InvalidArgumentError(`expected a whole number (got ${quote(v)})`);
  return n;
};
const dur = (v: string) => {
  if (parseDuration(v) === undefined) throw new InvalidArgumentError(`expected a duration such as 8s or 1m (got ${quote(v)})`);
  return v;
};
const inst = (v: string) => checkInstance(v);

function progressLogger(verbose = false): Logger {
  return createLogger((level, msg) => out.stderr(`lab: ${level === 'info' ? '' : `${level}: `}${msg}`), verbose ? 'debug' : 'info');
}

/** The lab's commands, each a subcommand of the lab's own program (`kube-runbook-lab up`, `kube-runbook-lab down` ...). */
export const register: Register = (lab, done) => {
  install(lab, done);
  up(lab, done);
  down(lab, done);
  status(lab, done);
  env(lab, done);
  containers(lab, done);
  fleet(lab, done);
  reboot(lab, done);
};

const withInstance = (c: Command) => c.option('--instance <name>', 'lab instance: 1 to 6 characters a-z0-9', inst, DEFAULT_INSTANCE);

function install(lab: Command, done: Done) {
  lab
    .command('install')
    .description(
      'Install what the lab needs (apt-get) and build a Kubernetes release once into the cache: 1.37 and 1.34 with Go from the Go module ' +
        "proxy (about 10 minutes each), 1.20 from Debian's source package (about 6 minutes).",
    )
    .option(
      '--kubernetes-version <version>',
      `${SUPPORTED_MINORS.map((m) => `1.${m}`).join(', ')}, or a patch release such as 1.37.2 (default 1.${DEFAULT_MINOR}: its newest patch)`,
    )
    .option(
      '--bin-dir <dir>',
      'use kube-apiserver, kube-controller-manager and kube-scheduler from this directory instead (or KUBEBUILDER_ASSETS)',
    )
    .option('--force', 'rebuild even when the cache has binaries')
    .option(
      '--real-nodes',
      "also what real nodes need (`lab up --real-nodes`): the release's kubelet, containerd 2.x, Debian's runc and CNI plugins, the pause and workload images",
    )
    .option('--otel', 'also the OpenTelemetry Collector `lab up --otel` runs, built with Go from the Go module proxy (about 6 minutes)')
    .action(async (f: { binDir?: string; force?: boolean; kubernetesVersion?: string; realNodes?: boolean; otel?: boolean }) => {
      const log = progressLogger();
      const bin = await installLab({ log, binDir: f.binDir, force: f.force, kubernetesVersion: f.kubernetesVersion });
      out.stdout(`Kubernetes ${bin.version}: ${bin.dir}\netcd: ${bin.etcd}`);
      if (f.realNodes) {
        const real = await ensureRealNodeBinaries({ log }, bin);
        out.stdout(
          [
            `kubelet: ${real.kubelet}`,
            `containerd ${real.containerd.version}: ${real.containerd.dir}`,
            `runc: ${real.runc}; CNI plugins: ${real.cniBinDir}`,
            `images: ${real.images.pause.ref} (${real.images.pause.archive}), ${real.images.workload.ref} (${real.images.workload.archive})`,
          ].join('\n'),
        );
      }
      if (f.otel) {
        const otel = await ensureOtelcol({ log }, cacheDir());
        out.stdout(`OpenTelemetry Collector ${otel.version}: ${otel.binary}`);
      }
      done(EXIT.ok);
    });
}

interface UpFlags {
  instance: string;
  realNodes?: number;
  staticPods?: boolean;
  kubeadm?: boolean;
  systemdNodes?: number;
  nodes?: number;
  controlPlanes: number;
  zones: number;
  grace?: string;
  monitorPeriod?: string;
  leaseRenew?: string;
  toleration?: string;
  startupGrace?: string;
  statusFrequency?: string;
  evictionRate?: number;
  secondaryEvictionRate?: number;
  unhealthyZoneThreshold?: number;
  largeClusterSizeThreshold?: number;
  replicas?: number;
  workload: boolean;
  prometheus?: boolean;
  otel?: boolean;
  etcdQuota?: string;
  binDir?: string;
  kubernetesVersion?: string;
  keepOnFailure?: boolean;
  json?: boolean;
}

function up(lab: Command, done: Done) {
  withInstance(lab.command('up'))
    .description('Start a lab; returns when every node is Ready and every pod runs. Needs root and `lab install` once.')
    .option('--nodes <n>', 'simulated worker nodes node-1..N (default 3; 0 with --kubeadm)', int)
    .option(
      '--real-nodes <n>',
      "real worker nodes rnode-1..N: the release's kubelet with containerd and runc, pods in real containers (built once on first use; see docs/lab.md)",
      int,
    )
    .option(
      '--static-pods',
      'run the control plane as static pods of a real kubelet on cp-1, from manifests as kubeadm writes them (the kubeadm layout of every action runs for real; needs --real-nodes; see docs/lab.md)',
    )
    .option(
      '--kubeadm',
      "make the control plane with the release's kubeadm: `kubeadm init` on cp-1 (its static pods, its files), `kubeadm join` of the real workers, and with --control-planes 3 `kubeadm join --control-plane` of cp-2 and cp-3 through the VIP (implies --static-pods; needs --real-nodes; see docs/lab.md)",
    )
    .option(
      '--systemd-nodes <n>',
      "with --kubeadm, also workers sd-1..N (at most 3) whose PID 1 is systemd (Debian's, on a root filesystem built once), joined by `kubeadm join` with kubeadm's kubelet unit and drop-in, reached over ssh (see docs/lab.md)",
      int,
    )
    .option(
      '--control-planes <n>',
      'control-plane members cp-1..N: 1, or 3 (or 5) for a 3-member etcd and leader-elected controllers behind HAProxy (the VIP); with --kubeadm, made by kubeadm',
      int,
      1,
    )
    .option('--zones <n>', 'zones zone-a, zone-b, ... the nodes are spread over', int, 1)
    .option('--grace <duration>', 'node-monitor-grace-period (default 8s)', dur)
    .option('--monitor-period <duration>', 'node-monitor-period (default 1s)', dur)
    .option('--lease-renew <duration>', 'kubelet lease renew interval; lease duration is 4x (default 2s)', dur)
    .option('--toleration <duration>', 'default tolerationSeconds of the not-ready/unreachable taints (default 30s)', dur)
    .option('--startup-grace <duration>', 'node-startup-grace-period (default 20s)', dur)
    .option('--status-frequency <duration>', 'how often a kubelet posts an unchanged NodeStatus (default 1m)', dur)
    .option('--eviction-rate <rate>', 'node-eviction-rate, nodes per second (default 0.1)', num)
    .option('--secondary-eviction-rate <rate>', 'secondary-node-eviction-rate (default 0.01)', num)
    .option('--unhealthy-zone-threshold <fraction>', 'unhealthy-zone-threshold (default 0.55)', num)
    .option('--large-cluster-size-threshold <n>', 'large-cluster-size-threshold (default 50)', int)
    .option('--replicas <n>', 'replicas of the sample Deployment (default 2 per node)', int)
    .option('--no-workload', 'no sample Deployment and Service')
    .option(
      '--prometheus',
      "also run Debian's Prometheus (apt-get installs it on first use) in a namespace of its own, scraping etcd (every 250 ms), the apiservers, controller-managers and schedulers (every second); the inventory's spec.prometheus points promql probes at it",
    )
    .option(
      '--otel',
      "also run an OTLP receiver (an OpenTelemetry Collector, built once from the Go module proxy on first use) on the lab's address; " +
        '`lab env` exports OTEL_EXPORTER_OTLP_ENDPOINT, so runs send it their trace and metrics, which it writes to otlp.jsonl (see docs/telemetry.md)',
    )
    .option(
      '--etcd-quota <size>',
      "etcd's space quota, 64Mi to 64Gi (default 512Mi: a throttled disk is felt; give more for 100k+ objects)",
    )
    .option(
      '--kubernetes-version <version>',
      `the release to run: ${SUPPORTED_MINORS.map((m) => `1.${m}`).join(', ')} or a cached patch release (default 1.${DEFAULT_MINOR})`,
    )
    .option('--bin-dir <dir>', 'Kubernetes binaries to use (or KUBEBUILDER_ASSETS; default: the cache `lab install` fills)')
    .option('--keep-on-failure', 'leave what was made when up fails (for debugging)')
    .option('--json', 'print the LabInfo as JSON')
    .action(async (f: UpFlags) => {
      const log = progressLogger();
      const info = await labUp({
        ...f,
        log,
        workload: f.workload,
        prometheus: f.prometheus ?? false,
        otel: f.otel ?? false,
        keepOnFailure: f.keepOnFailure,
      });
      if (f.json) out.stdout(JSON.stringify(info, null, 2));
      else
        out.stdout(
          [
            upLine(info),
            `  ${describeSettings(info.settings)}`,
            `  kubeconfig ${info.kubeconfig} (context ${info.context})`,
            `  inventory  ${info.inventoryFile}`,
            ...(info.prometheus
              ? [`  prometheus ${info.prometheus.url} (scrapes etcd every 250 ms, the other components every second)`]
              : []),
            ...(info.otel
              ? [`  otlp       ${info.otel.endpoint} (OpenTelemetry Collector ${info.otel.version}, writing ${info.otel.file})`]
              : []),
            `Use it:  eval "$(kube-runbook-lab env${info.instance === DEFAULT_INSTANCE ? '' : ` --instance ${info.instance}`})"`,
          ].join('\n'),
        );
      done(EXIT.ok);
    });
}

function down(lab: Command, done: Done) {
  withInstance(lab.command('down'))
    .description('Remove every process, namespace, veth, iptables chain and cgroup of the lab (also after a crash).')
    .option('--keep-state', 'keep the state directory (logs, kill logs)')
    .option('--json', 'print what was removed as JSON')
    .action(async (f: { instance: string; keepState?: boolean; json?: boolean }) => {
      const report = await labDown(f.instance, { log: progressLogger(), keepState: f.keepState });
      if (f.json) out.stdout(JSON.stringify(report, null, 2));
      done(EXIT.ok);
    });
}

function status(lab: Command, done: Done) {
  withInstance(lab.command('status'))
    .description('Components, nodes and pods of the lab; exit 1 when something is not healthy.')
    .option('--json', 'as JSON')
    .action(async (f: { instance: string; json?: boolean }) => {
      const s = await labStatus(f.instance);
      if (f.json) out.stdout(JSON.stringify(s, null, 2));
      else out.stdout(renderStatus(s));
      const healthy = s.components.every((c) => c.healthy) && Boolean(s.cluster?.nodes.every((n) => n.ready));
      done(healthy ? EXIT.ok : EXIT.failed);
    });
}

function env(lab: Command, done: Done) {
  withInstance(lab.command('env'))
    .description(
      'Print `export KUBECONFIG=...`, `export KUBE_RUNBOOK_INVENTORY=...` (and `export KUBE_RUNBOOK_PROMETHEUS=...` with --prometheus, ' +
        '`export OTEL_EXPORTER_OTLP_ENDPOINT=...` with --otel) for `eval`.',
    )
    .action(async (f: { instance: string }) => {
      const info = await readLabInfo(f.instance);
      const lines = [`export KUBECONFIG=${shq(info.kubeconfig)}`, `export KUBE_RUNBOOK_INVENTORY=${shq(info.inventoryFile)}`];
      if (info.prometheus) lines.push(`export KUBE_RUNBOOK_PROMETHEUS=${shq(info.prometheus.url)}`);
      if (info.otel) lines.push(`export OTEL_EXPORTER_OTLP_ENDPOINT=${shq(info.otel.endpoint)}`);
      out.stdout(lines.join('\n'));
      done(EXIT.ok);
    });
}

function reboot(lab: Command, done: Done) {
  withInstance(lab.command('reboot'))
    .description(
      'Reboot one lab node as a power cut would: kill every process in its namespace, then boot it: its services start unless they ' +
        'were stopped, and the scripts of its boot directory run (the dead-men of faults applied to it). A node whose PID 1 is ' +
        'systemd (sd-N) boots its systemd again, which starts the units enabled on it.',
    )
    .argument('<node>', 'cp-N, node-N, rnode-N, sd-N or lb')
    .option('--json', 'print what happened as JSON')
    .action(async (node: string, f: { instance: string; json?: boolean }) => {
      const r = await rebootLabNode(f.instance, node, { log: progressLogger() });
      if (f.json) out.stdout(JSON.stringify(r, null, 2));
      done(EXIT.ok);
    });
}

function containers(lab: Command, done: Done) {
  withInstance(lab.command('containers'))
    .description("Each node's containers: the simulated runtime's running ones and its kill log, a real node's containerd's.")
    .argument('[node]', 'one node (default: every worker, and cp-1 with --static-pods)')
    .option('--json', 'as JSON')
    .action(async (node: string | undefined, f: { instance: string; json?: boolean }) => {
      const states = await labContainers(await readLabInfo(f.instance), node);
      out.stdout(f.json ? JSON.stringify(states, null, 2) : renderContainers(states));
      done(EXIT.ok);
    });
}

function fleet(lab: Command, done: Done) {
  withInstance(lab.command('fleet'))
    .description('Simulate many nodes in one process (no namespaces) against a running lab, for scale work; Ctrl-C stops.')
    .requiredOption('--count <n>', 'simulated nodes', int)
    .option('--zones <n>', 'zones the fleet is spread over', int, 1)
    .option('--lease-renew <duration>', 'lease renew interval', dur, '10s')
    .option('--duration <duration>', 'stop after this long (default: until Ctrl-C)', dur)
    .option('--keep-nodes', 'leave the fleet nodes in the cluster when it stops')
    .option('--json', 'print the final figures as JSON')
    .action(
      async (f: {
        instance: string;
        count: number;
        zones: number;
        leaseRenew: string;
        duration?: string;
        keepNodes?: boolean;
        json?: boolean;
      }) => {
        const stop = new AbortController();
        const onSig = () => stop.abort();
        process.once('SIGINT', onSig);
        process.once('SIGTERM', onSig);
        const cancelTimer = f.duration ? realClock.setTimer(parseDuration(f.duration) ?? 0, () => stop.abort()) : undefined;
        const log = progressLogger();
        try {
          const final = await runFleet(
            {
              instance: f.instance,
              count: f.count,
              zones: f.zones,
              leaseRenewMs: parseDuration(f.leaseRenew),
              log,
              cleanup: !f.keepNodes,
              onProgress: (s) => log.info(fleetLine(s)),
            },
            stop.signal,
          );
          if (f.json) out.stdout(JSON.stringify(final));
          else out.stdout(fleetLine(final));
        } finally {
          cancelTimer?.();
          process.off('SIGINT', onSig);
          process.off('SIGTERM', onSig);
        }
        done(EXIT.ok);
      },
    );
}
