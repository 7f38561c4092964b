import { join } from 'node:path';
import { KubeConfig } from '@kubernetes/client-node';
import type { Clock } from 'kube-runbook/internal/core/clock.js';
import { KrError, messageOf } from 'kube-runbook/internal/core/errors.js';
import { startAndWait } from './control.js';
import * as comp from './components.js';
import { LB_NODE } from '../host/paths.js';
import { writeService } from './services.js';
import { haproxyService, parseShowStat, statsCommand, writeHaproxyConfig } from './haproxy.js';
import { findPackagedBinary } from '../install/packaged.js';
import { prometheusService, writePrometheusConfig, type PrometheusPlan } from './prometheus.js';
import { KUBEADM_ETCD_METRICS_PORT } from './kubeadm-config.js';
import { startPrometheus } from './prometheus-start.js';
import { otelService, writeOtelConfig } from './otel.js';
import { component, type LabComponent } from './up-component.js';
import type { LabPlan } from './up-plan.js';

/** HAProxy in front of the apiservers of an HA lab: the VIP kubelets and the kubeconfig use. */
export function haproxy(p: LabPlan, o: { waitBackends: boolean } = { waitBackends: true }): LabComponent {
  const lb = p.lb!;
  const dir = p.paths.serviceDir(LB_NODE, 'haproxy');
  return component({
    name: 'haproxy',
    async write() {
      const haproxyBinary = await findPackagedBinary('haproxy', 'haproxy', { log: p.log, signal: p.signal });
      const plan = { instance: p.instance, dir, netns: lb.netns, vip: lb.ip, caFile: p.pki.caCert, members: p.members, haproxyBinary };
      await writeService(haproxyService(plan));
      await writeHaproxyConfig(plan);
    },
    async start() {
      p.step(`haproxy: the VIP ${p.apiserverHost}:${comp.APISERVER_PORT}`);
      await startAndWait(dir, 30_000, p.clock, p.signal);
    },
    async ready() {
      if (o.waitBackends) await haproxyBackendsUp(p);
    },
  });
}

/** Until HAProxy sees every member's apiserver UP. */
export async function haproxyBackendsUp(p: LabPlan): Promise<void> {
  p.step('waiting for HAProxy to see every apiserver UP');
  await waitBackendsUp(join(p.paths.serviceDir(LB_NODE, 'haproxy'), 'stats.sock'), p.cps.length, p.clock, p.signal);
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

/** Prometheus scraping the control plane, started once the nodes are Ready. */
export function prometheus(p: LabPlan): LabComponent {
  const prom = p.prom!;
  const { pki } = p;
  const dir = p.paths.serviceDir(prom.node, 'prometheus');
  return component({
    name: 'prometheus',
    async write() {
      const binary = await findPackagedBinary('prometheus', 'prometheus', { log: p.log, signal: p.signal });
      const plan: PrometheusPlan = {
        instance: p.instance,
        dir,
        netns: prom.netns,
        ip: prom.ip,
        caFile: pki.caCert,
        certFile: pki.cert('prometheus'),
        keyFile: pki.key('prometheus'),
        members: p.members,
        ...(p.settings.kubeadm ? { etcdMetricsPort: KUBEADM_ETCD_METRICS_PORT } : {}),
        binary,
      };
      await writeService(prometheusService(plan));
      await writePrometheusConfig(plan);
    },
    async start() {
      const url = p.info.prometheus!.url;
      p.step(`prometheus: ${url}, scraping the control plane`);
      const admin = new KubeConfig();
      admin.loadFromFile(p.paths.kubeconfig);
      const targets = await startPrometheus({ dir, url, admin, clock: p.clock, signal: p.signal });
      p.step(`prometheus scrapes ${targets} targets`);
    },
  });
}

/** The OTLP receiver (OpenTelemetry Collector) that writes what runs send it to a file. */
export function otelCollector(p: LabPlan): LabComponent {
  const otel = p.otel!;
  return component({
    name: 'otelcol',
    async write() {
      await writeService(otelService(otel));
      await writeOtelConfig(otel);
    },
    async start() {
      const o = p.info.otel!;
      p.step(`OTLP receiver (OpenTelemetry Collector ${o.version}): ${o.endpoint}, writing ${o.file}`);
      await startAndWait(otel.dir, 30_000, p.clock, p.signal);
    },
  });
}
