import { describe, expect, it } from 'vitest';
import { silentLogger } from '../core/logger.js';
import type { Ctx } from '../contract/context.js';
import type { KubeAccess } from '../kube/types.js';
import { haltNamespaces } from '../kube/halt.js';
import { Inventory } from '../inventory/schema.js';
import { newAgentKeys } from '../nodes/agent-auth.js';
import { createPublicKey } from 'node:crypto';
import { agentPodName, readRenewal, runLeaseName } from '../nodes/agent-protocol.js';
import { FakeAgentApi, FakeStatusError } from '../testing/fake-agent-api.js';
import { FakeClock } from '../testing/fake-clock.js';
import { FakeNodes } from '../testing/fake-nodes.js';
import { agentPod, agentSecret } from './agent-pod.js';
import { agentsDuringOutage, agentTargets, RunAgents } from './agents.js';
import { registryOf } from '../contract/registry.js';
import { renderPlan } from '../report/plan-text.js';
import { Runbook } from '../runbook/schema.js';
import { recordingAction } from '../testing/fake-modules.js';
import { baseRunbook, testInventory } from '../testing/engine-harness.js';
import { buildPlan } from './static-checks.js';
import { inventoryOf } from '../testing/inventories.js';

const RUN = '20260101T000000Z-agents-ab12';
const keys = newAgentKeys();
const inventory = Inventory.parse(
  inventoryOf(
    {
      layout: 'kubeadm',
      transport: {
        type: 'agent',
        namespace: 'kr-agents',
        image: 'registry.example/agent:1',
        imagePullSecret: 'regcred',
        startTimeout: '20s',
      },
      nodes: [{ name: 'node-1' }, { name: 'node-2' }, { name: 'cp-1', roles: ['control-plane'], transport: { type: 'ssh' } }],
    },
    't',
  ),
);

interface PodObj {
  metadata: { name: string };
  spec: Record<string, unknown> & { containers: Record<string, unknown>[] };
  status?: unknown;
}

function setup(statusOf: (pod: PodObj) => unknown = () => ({ phase: 'Running', containerStatuses: [{ state: { running: {} } }] })) {
  const clock = new FakeClock();
  const api = new FakeAgentApi();
  const json = api.json.bind(api);
  // the kubelet's part: a created pod gets the status `statusOf` says
  api.json = async <T>(path: string, o?: Parameters<typeof json>[1]) => {
    const r = await json<T>(path, o);
    if (o?.method === 'POST' && path.endsWith('/pods')) {
      const pod = r as unknown as PodObj;
      api.put('pods', 'kr-agents', { ...pod, status: statusOf(pod) } as never);
    }
    return r;
  };
  const nodes = new FakeNodes(inventory.spec.nodes, ({ script }) => ({
    code: 0,
    stdout: script.includes('kube-runbook-agent-ok') ? 'kube-runbook-agent-ok\n' : '',
    stderr: '',
  }));
  const ctx: Ctx = {
    runId: RUN,
    clock,
    log: silentLogger,
    signal: new AbortController().signal,
    dryRun: false,
    inventory,
    kube: { json: (path: string, o: never) => api.json(path, o) } as unknown as KubeAccess,
    nodes,
    agentKeys: keys,
  };
  const targets = agentTargets(inventory, inventory.spec.nodes);
  return { clock, api, nodes, agents: new RunAgents(ctx, targets, 30_000) };
}

async function finish<T>(clock: FakeClock, p: Promise<T>): Promise<T> {
  let out: { v: T } | undefined;
  void p.then((v) => (out = { v }));
  await clock.runUntil(() => out !== undefined, 120_000, 100);
  return out!.v;
}

describe('agent pods', () => {
  it('are privileged, pinned to their node, in its PID and network namespaces, tolerate every taint and run the agent with no shell', () => {
    const [t] = agentTargets(inventory, inventory.spec.nodes);
    const pod = agentPod(RUN, t!, keys, 90_000, { name: runLeaseName(RUN), uid: 'lease-uid' }) as unknown as PodObj;
    expect(pod.metadata.name).toBe(agentPodName(RUN, 'node-1', keys.fingerprint));
    expect(pod.spec).toMatchObject({
      nodeName: 'node-1',
      hostPID: true,
      hostNetwork: true,
      priorityClassName: 'system-node-critical',
      tolerations: [{ operator: 'Exists' }],
      serviceAccountName: 'kube-runbook-agent',
      imagePullSecrets: [{ name: 'regcred' }],
      // ended for good once its run is gone (exit 0); started again after a crash
      restartPolicy: 'OnFailure',
    });
    expect(pod.spec.containers[0]).toMatchObject({
      image: 'registry.example/agent:1',
      command: ['kube-runbook'],
      args: [
        'agent',
        '--node',
        'node-1',
        '--namespace',
        'kr-agents',
        '--run-id',
        RUN,
        '--enter',
        'host',
        '--executor-key',
        keys.publicKey,
        '--fault-ttl',
        '90s',
      ],
      securityContext: { privileged: true },
      resources: { requests: { cpu: '10m', memory: '64Mi' } },
    });
  });

  it("follow the halts that stop their run: the cluster's, and its lock namespace's when that differs", () => {
    const [t] = agentTargets(inventory, inventory.spec.nodes);
    const halts = (lockNamespace: string) => {
      const pod = agentPod(RUN, t!, keys, 90_000, undefined, haltNamespaces(lockNamespace)) as unknown as PodObj;
      const args = pod.spec.containers[0]!.args as string[];
      return args.flatMap((a, i) => (args[i - 1] === '--halt-namespace' ? [a] : []));
    };
    expect(halts('kube-system')).toEqual(['kube-system']);
    expect(halts('kr-locks')).toEqual(['kube-system', 'kr-locks']);
  });

  it('take the key they sign results with from a Secret of their own, and go with the run Lease', () => {
    const [t] = agentTargets(inventory, inventory.spec.nodes);
    const owner = { name: runLeaseName(RUN), uid: 'lease-uid' };
    const pod = agentPod(RUN, t!, keys, 90_000, owner) as unknown as PodObj & { metadata: { ownerReferences: unknown[] } };
    const secret = agentSecret(RUN, t!, keys, owner) as {
      metadata: { name: string; ownerReferences: unknown[] };
      immutable: boolean;
      stringData: Record<string, string>;
    };
    expect(pod.spec.containers[0]!.env).toContainEqual({
      name: 'KUBE_RUNBOOK_RESULT_KEY',
      valueFrom: { secretKeyRef: { name: secret.metadata.name, key: 'result-key' } },
    });
    expect(secret.immutable).toBe(true);
    expect(Buffer.from(secret.stringData['result-key']!, 'base64')).toEqual(keys.resultKey('node-1'));
    expect(keys.resultKey('node-2')).not.toEqual(keys.resultKey('node-1'));
    for (const o of [pod, secret])
      expect(o.metadata.ownerReferences).toEqual([
        { apiVersion: 'coordination.k8s.io/v1', kind: 'Lease', name: owner.name, uid: 'lease-uid' },
      ]);
    // the run's key pair names its pods: recover's agents (keys of their own) never meet the run's
    expect(agentPodName(RUN, 'node-1', newAgentKeys().fingerprint)).not.toBe(pod.metadata.name);
  });

  it("run as root in their own group when the transport names one (runAsGroup), so block-kubelet-egress can let them through; else in the image's", () => {
    const spec = { transport: { type: 'agent' as const, namespace: 'kr-agents', runAsGroup: 4242 }, nodes: [{ name: 'rnode-1' }] };
    const own = Inventory.parse(inventoryOf({ ...spec, layout: 'kubeadm' }));
    const pod = agentPod(RUN, agentTargets(own, own.spec.nodes)[0]!, keys, 90_000) as unknown as PodObj;
    expect(pod.spec.containers[0]!.securityContext).toEqual({ privileged: true, runAsUser: 0, runAsGroup: 4242 });
    const [t] = agentTargets(inventory, inventory.spec.nodes);
    expect((agentPod(RUN, t!, keys, 90_000) as unknown as PodObj).spec.containers[0]!.securityContext).toEqual({ privileged: true });
  });

  it('only nodes reached through an agent get one', () => {
    expect(agentTargets(inventory, inventory.spec.nodes).map((t) => t.node.name)).toEqual(['node-1', 'node-2']);
  });
});

describe('starting and stopping the agents of a run', () => {
  it('writes the run Lease, creates a Secret and a pod per node and waits until each agent answers; stop deletes them all, of any key, and leftover requests', async () => {
    const { clock, api, nodes, agents } = setup();
    expect(await finish(clock, agents.start(new AbortController().signal))).toEqual([]);
    const names = [agentPodName(RUN, 'node-1', keys.fingerprint), agentPodName(RUN, 'node-2', keys.fingerprint)].sort();
    expect(api.names('pods', 'kr-agents').sort()).toEqual(names);
    expect(api.names('secrets', 'kr-agents').sort()).toEqual(names);
    // a pod of the same run left by an earlier executor (another key)
    const [t] = agentTargets(inventory, inventory.spec.nodes);
    api.put('pods', 'kr-agents', agentPod(RUN, t!, newAgentKeys(), 30_000) as never);
    expect(api.names('leases', 'kr-agents')).toEqual([runLeaseName(RUN)]);
    expect(nodes.calls.map((c) => c.node).sort()).toEqual(['node-1', 'node-2']);
    const lease = api.objects.get(`leases/kr-agents/${runLeaseName(RUN)}`) as unknown as {
      spec: { holderIdentity: string; renewTime: string };
    };
    expect(lease.spec.holderIdentity).toBe(RUN);
    await clock.advance(5000);
    await agents.renew();
    const renewed = api.objects.get(`leases/kr-agents/${runLeaseName(RUN)}`) as unknown as { spec: { renewTime: string } };
    expect(renewed.spec.renewTime).not.toBe(lease.spec.renewTime);
    // each renewal signed with the executor's key, numbered higher than the one before: what its agents count
    const me = {
      runId: RUN,
      namespace: 'kr-agents',
      executorKey: createPublicKey({ key: Buffer.from(keys.publicKey, 'base64'), format: 'der', type: 'spki' }),
    };
    const first = readRenewal(lease, me) as { seq: number };
    expect(first.seq).toBeGreaterThan(0);
    expect(readRenewal(renewed, me)).toEqual({ seq: first.seq + 1 });
    expect(
      readRenewal(renewed, {
        ...me,
        executorKey: createPublicKey({ key: Buffer.from(newAgentKeys().publicKey, 'base64'), format: 'der', type: 'spki' }),
      }),
    ).toEqual({
      ignored: expect.stringMatching(/is not this agent's executor's/) as string,
      kind: 'signature',
    });
    expect(await agents.stop()).toEqual([]);
    expect([...api.objects.keys()]).toEqual([]);
  });

  it('an image that cannot be pulled is named, with the fix', async () => {
    const { clock, agents } = setup(() => ({
      phase: 'Pending',
      containerStatuses: [{ state: { waiting: { reason: 'ErrImagePull', message: 'manifest unknown' } } }],
    }));
    const problems = await finish(clock, agents.start(new AbortController().signal));
    expect(problems).toEqual([
      "node-1: image registry.example/agent:1 cannot be pulled (ErrImagePull: manifest unknown); fix spec.transport.image, or give the registry's credentials as spec.transport.imagePullSecret (a Secret in kr-agents)",
      "node-2: image registry.example/agent:1 cannot be pulled (ErrImagePull: manifest unknown); fix spec.transport.image, or give the registry's credentials as spec.transport.imagePullSecret (a Secret in kr-agents)",
    ]);
  });

  it('an agent that exits says why (its missing permissions, from its termination message)', async () => {
    const { clock, agents } = setup(() => ({
      phase: 'Running',
      containerStatuses: [
        {
          state: { waiting: { reason: 'CrashLoopBackOff' } },
          lastState: {
            terminated: { exitCode: 3, message: "the agent's ServiceAccount may not get leases.coordination.k8s.io in kr-agents\n" },
          },
        },
      ],
    }));
    const [p] = await finish(clock, agents.start(new AbortController().signal));
    expect(p).toBe("node-1: the agent exited with 3: the agent's ServiceAccount may not get leases.coordination.k8s.io in kr-agents");
  });

  it('a namespace whose Pod Security level refuses privileged pods is named, with the label that admits them', async () => {
    const { clock, api, agents } = setup();
    const json = api.json.bind(api);
    api.json = async <T>(path: string, o?: Parameters<typeof json>[1]) => {
      if (o?.method === 'POST' && path.endsWith('/pods'))
        throw new FakeStatusError(
          403,
          'pods "x" is forbidden: violates PodSecurity "baseline:latest": host namespaces (hostNetwork=true, hostPID=true), privileged (container "agent" must not set securityContext.privileged=true)',
        );
      return json<T>(path, o);
    };
    const [p] = await finish(clock, agents.start(new AbortController().signal));
    expect(p).toMatch(/^node-1: the namespace kr-agents refuses privileged pods \(Pod Security: .*violates PodSecurity "baseline:latest"/);
    expect(p).toMatch(/kubectl label namespace kr-agents pod-security\.kubernetes\.io\/enforce=privileged --overwrite/);
  });

  it('a pod its kubelet never starts fails after startTimeout, saying where it stood', async () => {
    const { clock, agents } = setup(() => ({ phase: 'Pending' }));
    const t0 = clock.now();
    const [p] = await finish(clock, agents.start(new AbortController().signal));
    expect(clock.now() - t0).toBeGreaterThanOrEqual(20_000);
    expect(p).toMatch(
      /^node-1: its agent pod kr-agents\/kr-agent-node-1-[0-9a-f]{8} did not start within 20s: Pending; is node node-1 Ready\?/,
    );
  });
});

describe('nodes reached through agents during an apiserver outage', () => {
  const outageRegistry = () => {
    const stop = recordingAction('stop-apiserver', []);
    stop.meta = { ...stop.meta, stopsApiserver: true };
    return registryOf([stop, recordingAction('fault-b', [])], []);
  };
  const mixed = Inventory.parse({
    ...testInventory(),
    spec: {
      ...testInventory().spec,
      nodes: [
        { name: 'cp-1', roles: ['control-plane'] },
        { name: 'node-1', transport: { type: 'agent', enter: 'mount' } },
      ],
    },
  });
  const planOf = (steps: unknown[]) =>
    buildPlan({ runbook: Runbook.parse(baseRunbook({ steps })), file: 't.yaml', inventory: mixed, registry: outageRegistry() });

  it('a step on them while every apiserver is stopped is named, with the way out', async () => {
    const p = await planOf([
      { name: 'down', action: 'stop-apiserver', with: { nodes: 'control-plane' } },
      { name: 'cut', action: 'fault-b', with: { nodes: { names: ['node-1'] } } },
    ]);
    expect(agentsDuringOutage(p)).toEqual([
      'step 2 (fault-b on node-1) acts through node agents while step 1 (stop-apiserver) keeps every apiserver stopped, and agents are reached through the apiserver: act on those nodes before the outage, or reach them by ssh',
    ]);
    expect(renderPlan(p)).toContain('warning: step 2 (fault-b on node-1) acts through node agents while step 1 (stop-apiserver)');
  });

  it('before the outage, or after its revert step, is fine', async () => {
    const p = await planOf([
      { name: 'cut', action: 'fault-b', with: { nodes: { names: ['node-1'] } } },
      { name: 'down', action: 'stop-apiserver', with: { nodes: 'control-plane' } },
      { name: 'up', revert: 'down' },
      { name: 'again', action: 'fault-b', with: { nodes: { names: ['node-1'] } } },
    ]);
    expect(agentsDuringOutage(p)).toEqual([]);
  });
});
