import { AppsV1Api, CoreV1Api, type KubeConfig } from '@kubernetes/client-node';
import type { Clock } from 'kube-runbook/internal/core/clock.js';
import { KrError, messageOf } from 'kube-runbook/internal/core/errors.js';
import { SimApi, statusOf } from '../sim/api.js';

const WORKLOAD_NAMESPACE = 'demo';
const WORKLOAD_NAME = 'demo';

/**
 * The sample workload: a Deployment spread over the nodes (one topology spread per hostname) and a Service. With
 * `image` (a lab with real nodes: the locally built busybox image), its containers say where they run on their
 * output and serve HTTP on 8080 with busybox's httpd; the image is never pulled (IfNotPresent, and present).
 * `avoid`: nodes that hold none of its pods (the control plane of `--static-pods`): out of the spread's count by node
 * affinity, not by their taint, so that a node not Ready yet (tainted not-ready for a moment) still counts.
 */
export async function createWorkload(
  kc: KubeConfig,
  replicas: number,
  clock: Clock,
  signal?: AbortSignal,
  image?: string,
  avoid: string[] = [],
): Promise<void> {
  const core = kc.makeApiClient(CoreV1Api);
  const apps = kc.makeApiClient(AppsV1Api);
  const labels = { app: WORKLOAD_NAME };
  await ignoreExists(() => core.createNamespace({ body: { metadata: { name: WORKLOAD_NAMESPACE } } }));
  await waitServiceAccount(kc, WORKLOAD_NAMESPACE, clock, signal);
  await ignoreExists(() =>
    apps.createNamespacedDeployment({
      namespace: WORKLOAD_NAMESPACE,
      body: {
        metadata: { name: WORKLOAD_NAME, labels },
        spec: {
          replicas,
          selector: { matchLabels: labels },
          template: {
            metadata: { labels },
            spec: {
              automountServiceAccountToken: false,
              topologySpreadConstraints: [
                {
                  maxSkew: 1,
                  topologyKey: 'kubernetes.io/hostname',
                  whenUnsatisfiable: 'DoNotSchedule',
                  labelSelector: { matchLabels: labels },
                },
              ],
              ...(avoid.length
                ? {
                    affinity: {
                      nodeAffinity: {
                        requiredDuringSchedulingIgnoredDuringExecution: {
                          nodeSelectorTerms: [{ matchExpressions: [{ key: 'kubernetes.io/hostname', operator: 'NotIn', values: avoid }] }],
                        },
                      },
                    },
                  }
                : {}),
              containers: [
                image ? realContainer(image) : { name: 'web', image: 'registry.k8s.io/pause:3.2', ports: [{ containerPort: 8080 }] },
              ],
            },
          },
        },
      },
    }),
  );
  await ignoreExists(() =>
    core.createNamespacedService({
      namespace: WORKLOAD_NAMESPACE,
      body: { metadata: { name: WORKLOAD_NAME, labels }, spec: { selector: labels, ports: [{ port: 80, targetPort: 8080 }] } },
    }),
  );
}

function realContainer(image: string) {
  return {
    name: 'web',
    image,
    imagePullPolicy: 'IfNotPresent',
    // a server that stops on SIGTERM, as real ones do: httpd as PID 1 would ignore it and make the kubelet wait out the
    // pod's whole grace period (30 s) before a kill, after every eviction
    command: [
      '/bin/sh',
      '-c',
      'echo "demo: serving on $(hostname)"; echo "demo on $(hostname)" > /www/index.html; httpd -f -p 8080 -h /www & trap "kill $! 2>/dev/null; exit 0" TERM INT; wait',
    ],
    ports: [{ containerPort: 8080 }],
  };
}

/** Waits for a namespace's `default` ServiceAccount (the controller-manager makes it; pods are refused until then). */
export async function waitServiceAccount(kc: KubeConfig, namespace: string, clock: Clock, signal?: AbortSignal): Promise<void> {
  const core = kc.makeApiClient(CoreV1Api);
  const deadline = clock.now() + 60_000;
  for (;;) {
    try {
      await core.readNamespacedServiceAccount({ name: 'default', namespace });
      return;
    } catch (e) {
      if (clock.now() > deadline)
        throw new KrError('LAB_NOT_READY', `no default ServiceAccount in namespace ${namespace}: ${messageOf(e)}`);
      await clock.sleep(200, signal);
    }
  }
}

async function ignoreExists(fn: () => Promise<unknown>): Promise<void> {
  try {
    await fn();
  } catch (e) {
    if (statusOf(e) !== 409) throw e;
  }
}

export interface ClusterSummary {
  nodes: { name: string; ready: boolean; zone?: string; taints: string[] }[];
  pods: { namespace: string; name: string; node?: string; phase: string; ready: boolean; terminating: boolean }[];
}

export async function clusterSummary(kc: KubeConfig, timeoutMs = 5000): Promise<ClusterSummary> {
  const api = new SimApi(kc, timeoutMs);
  try {
    return await summarize(api);
  } finally {
    await api.close();
  }
}

async function summarize(api: SimApi): Promise<ClusterSummary> {
  const [nodes, pods] = await Promise.all([api.core.listNode({}, api.opts()), api.core.listPodForAllNamespaces({}, api.opts())]);
  return {
    nodes: nodes.items.map((n) => ({
      name: n.metadata?.name ?? '',
      ready: n.status?.conditions?.find((c) => c.type === 'Ready')?.status === 'True',
      zone: n.metadata?.labels?.['topology.kubernetes.io/zone'],
      taints: (n.spec?.taints ?? []).map((t) => `${t.key}:${t.effect}`),
    })),
    pods: pods.items.map((p) => ({
      namespace: p.metadata?.namespace ?? '',
      name: p.metadata?.name ?? '',
      node: p.spec?.nodeName,
      phase: p.status?.phase ?? 'Unknown',
      ready: p.status?.conditions?.find((c) => c.type === 'Ready')?.status === 'True',
      terminating: Boolean(p.metadata?.deletionTimestamp),
    })),
  };
}

/**
 * Waits until the named nodes are Ready, `pods` pods of the sample workload exist and every pod runs and is ready
 * (the sample's counted apart: a control plane's static pods, running already, are no sample pods not yet made).
 */
export async function waitReady(
  kc: KubeConfig,
  o: { nodes: string[]; pods: number; timeoutMs: number; clock: Clock; signal?: AbortSignal },
): Promise<ClusterSummary> {
  const deadline = o.clock.now() + o.timeoutMs;
  let last: ClusterSummary | undefined;
  let lastError = '';
  let made = 0;
  const api = new SimApi(kc, 5000);
  try {
    for (;;) {
      try {
        last = await summarize(api);
        const ready = new Set(last.nodes.filter((n) => n.ready).map((n) => n.name));
        const nodesOk = o.nodes.every((n) => ready.has(n));
        made = last.pods.filter((p) => p.namespace === WORKLOAD_NAMESPACE).length;
        const podsOk = made >= o.pods && last.pods.every((p) => p.phase === 'Running' && p.ready && !p.terminating);
        if (nodesOk && podsOk) return last;
      } catch (e) {
        lastError = messageOf(e);
      }
      if (o.clock.now() > deadline) {
        const notReady = o.nodes.filter((n) => !last?.nodes.some((x) => x.name === n && x.ready));
        const pending = (last?.pods ?? [])
          .filter((p) => p.phase !== 'Running' || !p.ready)
          .map((p) => `${p.namespace}/${p.name} ${p.phase}`);
        throw new KrError('LAB_NOT_READY', `the lab did not become ready within ${Math.round(o.timeoutMs / 1000)}s`, {
          details: [
            `nodes not Ready: ${notReady.join(', ') || 'none'}`,
            `pods not running: ${pending.slice(0, 10).join(', ') || (last && made < o.pods ? `${made} of ${o.pods} created` : 'none')}`,
            ...(lastError ? [`last error: ${lastError}`] : []),
          ],
        });
      }
      await o.clock.sleep(300, o.signal);
    }
  } finally {
    await api.close();
  }
}
