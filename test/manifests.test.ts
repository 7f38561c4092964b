import { mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { parseAllDocuments, parse, stringify } from 'yaml';
import { afterAll, describe, expect, it } from 'vitest';
import { agentManifests } from '../src/cli/agent.js';
import { renderManifests } from '../src/cli/manifests.js';
import { parseDuration } from '../src/core/duration.js';
import { defaultRegistry } from '../src/engine/registry.js';

const root = fileURLToPath(new URL('..', import.meta.url));
const inventory = `${root}examples/inventory-lab.yaml`;
const shipped = readdirSync(`${root}runbooks`, { recursive: true })
  .map(String)
  .filter((f) => f.endsWith('.yaml'))
  .sort();

interface Rule {
  apiGroups?: string[];
  resources?: string[];
  nonResourceURLs?: string[];
  resourceNames?: string[];
  verbs: string[];
}
interface Obj {
  kind: string;
  metadata: { name: string; namespace?: string };
  rules?: Rule[];
  spec?: Record<string, unknown>;
}

async function objects(
  file: string,
  o: { schedule?: string; reportConfigmap?: boolean; namespace?: string; inventory?: string; sshSecret?: string } = {},
  nonce?: string,
): Promise<Obj[]> {
  const path = file.startsWith('/') ? file : `${root}runbooks/${file}`;
  const { yaml } = await renderManifests(path, { inventory, namespace: 'kube-runbook', image: 'example/kube-runbook:test', ...o }, nonce);
  return parseAllDocuments(yaml).map((d) => d.toJS() as Obj);
}

/** Every module id a runbook names, read from its YAML (not through the plan the generator uses). */
function moduleIds(file: string): { actions: Set<string>; probes: Set<string> } {
  const actions = new Set<string>();
  const probes = new Set<string>(['pod-deletions', 'eviction-forecast']); // the observers every run starts
  const walk = (v: unknown, key?: string) => {
    if (Array.isArray(v)) return v.forEach((x) => walk(x));
    if (!v || typeof v !== 'object') return;
    for (const [k, x] of Object.entries(v)) {
      if (k === 'action' && typeof x === 'string') actions.add(x);
      else if (k === 'probe' && typeof x === 'string') probes.add(x);
      else walk(x, k);
    }
    void key;
  };
  walk(parse(readFileSync(`${root}runbooks/${file}`, 'utf8')));
  return { actions, probes };
}

/** group|resource|verb (namespace not compared: a declaration may take it from a param) and url|path|verb. */
async function declared(file: string): Promise<Set<string>> {
  const { actions, probes } = moduleIds(file);
  const out = new Set(['|nodes|list', 'url|/version|get']); // the engine's own
  const metas = [
    ...(await Promise.all([...actions].map((id) => defaultRegistry.action(id)))),
    ...(await Promise.all([...probes].map((id) => defaultRegistry.probe(id)))),
  ];
  for (const m of metas)
    for (const a of m.meta.access)
      for (const verb of a.verbs)
        out.add('nonResourceURL' in a ? `url|${a.nonResourceURL}|${verb}` : `${a.apiGroup}|${a.resource}|${verb}`);
  return out;
}

const granted = (rules: Rule[]) =>
  rules.flatMap((r) =>
    r.nonResourceURLs
      ? r.nonResourceURLs.flatMap((u) => r.verbs.map((v) => `url|${u}|${v}`))
      : (r.apiGroups ?? []).flatMap((g) => (r.resources ?? []).flatMap((res) => r.verbs.map((v) => `${g}|${res}|${v}`))),
  );

const tmp = mkdtempSync(join(tmpdir(), 'kr-manifests-'));
afterAll(() => rmSync(tmp, { recursive: true, force: true }));

interface PodSpec {
  terminationGracePeriodSeconds: number;
  securityContext: Record<string, unknown>;
  affinity?: { nodeAffinity: { requiredDuringSchedulingIgnoredDuringExecution: { nodeSelectorTerms: unknown[] } } };
  containers: {
    securityContext: { capabilities: { drop?: string[]; add?: string[] } } & Record<string, unknown>;
    resources: { requests: Record<string, string> };
    volumeMounts: Record<string, unknown>[];
  }[];
  volumes: Record<string, unknown>[];
}
interface JobObj {
  metadata: { name: string };
  spec: { activeDeadlineSeconds: number; template: { spec: PodSpec } };
}
const jobOf = (objs: Obj[]) => objs.find((o) => o.kind === 'Job') as unknown as JobObj;
const podOf = (objs: Obj[]) => jobOf(objs).spec.template.spec;

describe('kube-runbook manifests: least privilege from the modules’ own declarations', () => {
  it('ships runbooks to check', () => expect(shipped.length).toBeGreaterThan(3));

  // the one shipped runbook that writes API objects: its FlowSchema and priority level, created and deleted
  const writes: Record<string, string[]> = {
    'emergency/shed-apiserver-load.yaml': ['flowschemas', 'prioritylevelconfigurations'],
  };
  for (const file of shipped)
    it(`${file}: no wildcard, nothing but what its modules declare, read-only${writes[file] ? ` but ${writes[file].join(' and ')}` : ''}`, async () => {
      // load-balancer-outage stops the HAProxy of a node of role load-balancer: a lab of several control planes has one
      const objs = await objects(file, file === 'load-balancer-outage.yaml' ? { inventory: `${root}examples/inventory-lab-ha.yaml` } : {});
      const roles = objs.filter((o) => o.kind === 'ClusterRole' || o.kind === 'Role');
      expect(roles.filter((o) => o.kind === 'ClusterRole')).toHaveLength(1);
      // the run lock: the one write, to one Lease in kube-system (created once, then read and renewed by name)
      const lockNs = roles.filter((r) => r.kind === 'Role' && r.metadata.namespace === 'kube-system').flatMap((r) => r.rules ?? []);
      const isLeases = (r: Rule) => r.apiGroups?.[0] === 'coordination.k8s.io' && r.resources?.[0] === 'leases';
      expect(lockNs.some((r) => isLeases(r) && !r.resourceNames && r.verbs.includes('create'))).toBe(true);
      expect(lockNs).toContainEqual({
        apiGroups: ['coordination.k8s.io'],
        resources: ['leases'],
        resourceNames: ['kube-runbook-run-lock'],
        verbs: ['get', 'update'],
      });
      const rules = roles
        .flatMap((r) => r.rules ?? [])
        .filter((r) => !r.resourceNames)
        .map((r) => (lockNs.includes(r) && isLeases(r) ? { ...r, verbs: r.verbs.filter((v) => v !== 'create') } : r))
        .filter((r) => r.verbs.length);
      expect(rules.length).toBeGreaterThan(0);
      for (const r of rules)
        for (const list of [r.apiGroups, r.resources, r.nonResourceURLs, r.verbs]) expect(list ?? []).not.toContain('*');
      const allowed = await declared(file);
      for (const g of granted(rules)) expect(allowed, `${file} grants ${g}, which no module of it declares`).toContain(g);
      for (const r of rules)
        expect(
          r.verbs.every(
            (v) =>
              ['get', 'list', 'watch'].includes(v) ||
              (['create', 'delete'].includes(v) &&
                r.apiGroups?.join() === 'flowcontrol.apiserver.k8s.io' &&
                r.resources?.every((x) => writes[file]?.includes(x))),
          ),
          JSON.stringify(r),
        ).toBe(true);
    });

  it('kubelet-partition: exactly these permissions', async () => {
    const objs = await objects('kubelet-partition.yaml');
    const roles = objs
      .filter((o) => o.kind === 'ClusterRole' || o.kind === 'Role')
      .map((o) => ({ kind: o.kind, namespace: o.metadata.namespace, rules: o.rules }));
    expect(roles).toEqual([
      {
        kind: 'ClusterRole',
        namespace: undefined,
        rules: [
          { apiGroups: [''], resources: ['nodes'], verbs: ['list', 'watch'] },
          { apiGroups: [''], resources: ['pods'], verbs: ['list', 'watch'] },
          // the recovery objective "every Deployment available again"
          { apiGroups: ['apps'], resources: ['deployments'], verbs: ['list', 'watch'] },
          // eviction-forecast's device taints (deviceTaints, on by default)
          { apiGroups: ['resource.k8s.io'], resources: ['devicetaintrules'], verbs: ['list', 'watch'] },
          { apiGroups: ['resource.k8s.io'], resources: ['resourceclaims'], verbs: ['list', 'watch'] },
          { apiGroups: ['resource.k8s.io'], resources: ['resourceslices'], verbs: ['list', 'watch'] },
          { nonResourceURLs: ['/version'], verbs: ['get'] },
        ],
      },
      { kind: 'Role', namespace: 'default', rules: [{ apiGroups: [''], resources: ['endpoints'], verbs: ['get'] }] },
      {
        kind: 'Role',
        namespace: 'kube-node-lease',
        rules: [{ apiGroups: ['coordination.k8s.io'], resources: ['leases'], verbs: ['list', 'watch'] }],
      },
      {
        kind: 'Role',
        namespace: 'kube-system',
        rules: [
          { apiGroups: ['coordination.k8s.io'], resources: ['leases'], verbs: ['list', 'watch', 'create'] },
          { apiGroups: ['coordination.k8s.io'], resources: ['leases'], resourceNames: ['kube-runbook-halt'], verbs: ['get'] },
          { apiGroups: ['coordination.k8s.io'], resources: ['leases'], resourceNames: ['kube-runbook-run-lock'], verbs: ['get', 'update'] },
        ],
      },
      {
        kind: 'Role',
        namespace: 'kube-runbook',
        rules: [
          {
            apiGroups: [''],
            resources: ['configmaps'],
            resourceNames: ['kube-runbook-kubelet-partition-journal'],
            verbs: ['get', 'patch'],
          },
          {
            apiGroups: [''],
            resources: ['secrets'],
            resourceNames: ['kube-runbook-kubelet-partition-journal-key'],
            verbs: ['get', 'patch'],
          },
        ],
      },
    ]);
    expect(objs.map((o) => o.kind)).toEqual([
      'Namespace',
      'ServiceAccount',
      'ClusterRole',
      'ClusterRoleBinding',
      'Role',
      'RoleBinding',
      'Role',
      'RoleBinding',
      'Role',
      'RoleBinding',
      'ConfigMap',
      'Secret',
      'Role',
      'RoleBinding',
      'ConfigMap',
      'Job',
    ]);
  });

  it('a schedule makes a CronJob that never runs two at once, and the pod runs in-cluster with the mounted files', async () => {
    const objs = await objects('kubelet-partition.yaml', { schedule: '0 3 * * 1' });
    const cron = objs.find((o) => o.kind === 'CronJob')!;
    expect(cron.spec).toMatchObject({ schedule: '0 3 * * 1', concurrencyPolicy: 'Forbid', jobTemplate: { spec: { backoffLimit: 0 } } });
    const cm = objs.find((o) => o.kind === 'ConfigMap' && 'data' in o) as unknown as { data: Record<string, string> };
    expect(cm.data['runbook.yaml']).toBe(readFileSync(`${root}runbooks/kubelet-partition.yaml`, 'utf8'));
    expect(cm.data['inventory.yaml']).toBe(readFileSync(inventory, 'utf8'));
    const pod = (
      cron.spec as { jobTemplate: { spec: { template: { spec: { serviceAccountName: string; containers: { args: string[] }[] } } } } }
    ).jobTemplate.spec.template.spec;
    expect(pod.serviceAccountName).toBe('kube-runbook-kubelet-partition');
    expect(pod.containers[0]!.args).toEqual([
      'run',
      '/etc/kube-runbook/runbook.yaml',
      '--inventory',
      '/etc/kube-runbook/inventory.yaml',
      '--in-cluster',
      '--yes',
      '--output',
      'json',
      '--journal-configmap',
      'kube-runbook/kube-runbook-kubelet-partition-journal',
    ]);
  });

  it('--report-configmap: the report ConfigMap is created empty here, and the Job may get and patch it and the journal by name, create nothing', async () => {
    const objs = await objects('kubelet-partition.yaml', { reportConfigmap: true });
    const role = objs.find((o) => o.kind === 'Role' && o.metadata.namespace === 'kube-runbook');
    const names = ['kube-runbook-kubelet-partition-journal', 'kube-runbook-kubelet-partition-report'];
    expect(role?.rules).toEqual([
      { apiGroups: [''], resources: ['configmaps'], resourceNames: names, verbs: ['get', 'patch'] },
      { apiGroups: [''], resources: ['secrets'], resourceNames: ['kube-runbook-kubelet-partition-journal-key'], verbs: ['get', 'patch'] },
    ]);
    const rules = objs.flatMap((o) => o.rules ?? []);
    expect(rules.filter((r) => r.resources?.includes('configmaps') && (!r.resourceNames || r.verbs.includes('create')))).toEqual([]);
    // applying the manifests again must not wipe what a run wrote: these ConfigMaps carry no data of their own
    for (const name of names)
      expect(objs.find((o) => o.kind === 'ConfigMap' && o.metadata.name === name)).toEqual({
        apiVersion: 'v1',
        kind: 'ConfigMap',
        metadata: expect.objectContaining({ name, namespace: 'kube-runbook' }),
      });
    const job = objs.find((o) => o.kind === 'Job') as unknown as { spec: { template: { spec: { containers: { args: string[] }[] } } } };
    expect(job.spec.template.spec.containers[0]!.args.slice(-2)).toEqual([
      '--report-configmap',
      'kube-runbook/kube-runbook-kubelet-partition-report',
    ]);
  });

  it("the journal's key: its Secret is created empty here (the first run draws the key), and the Job may get and patch that Secret alone", async () => {
    const objs = await objects('kubelet-partition.yaml');
    // applying the manifests again must not replace the key a run drew: the Secret carries no data of its own
    expect(objs.find((o) => o.kind === 'Secret')).toEqual({
      apiVersion: 'v1',
      kind: 'Secret',
      metadata: expect.objectContaining({ name: 'kube-runbook-kubelet-partition-journal-key', namespace: 'kube-runbook' }),
      type: 'Opaque',
    });
    const secretRules = objs.flatMap((o) => o.rules ?? []).filter((r) => r.resources?.includes('secrets'));
    expect(secretRules).toEqual([
      { apiGroups: [''], resources: ['secrets'], resourceNames: ['kube-runbook-kubelet-partition-journal-key'], verbs: ['get', 'patch'] },
    ]);
  });

  it('the namespace admits only restricted pods, and the executor pod is one: non-root, RuntimeDefault seccomp, no privilege, requests set', async () => {
    const objs = await objects('kubelet-partition.yaml');
    const ns = objs.find((o) => o.kind === 'Namespace') as unknown as { metadata: { labels: Record<string, string> } };
    expect(ns.metadata.labels).toMatchObject({
      'pod-security.kubernetes.io/enforce': 'restricted',
      'pod-security.kubernetes.io/warn': 'restricted',
      'pod-security.kubernetes.io/audit': 'restricted',
    });
    const pod = podOf(objs);
    expect(pod.securityContext).toMatchObject({ runAsNonRoot: true, seccompProfile: { type: 'RuntimeDefault' } });
    const c = pod.containers[0]!;
    expect(c.securityContext).toMatchObject({ allowPrivilegeEscalation: false, runAsNonRoot: true, capabilities: { drop: ['ALL'] } });
    expect(c.securityContext.capabilities.add).toBeUndefined();
    expect(Object.keys(c.resources.requests).sort()).toEqual(['cpu', 'memory']);
    expect(pod.volumes.every((v) => !('hostPath' in v))).toBe(true);
  });

  it('--ssh-secret: the key is mounted read-only where the inventory names it, readable by the executor (its group) and nobody else', async () => {
    const pod = podOf(await objects('kubelet-partition.yaml', { sshSecret: 'kube-runbook-ssh' }));
    expect(pod.volumes).toContainEqual({ name: 'ssh', secret: { secretName: 'kube-runbook-ssh', defaultMode: 0o400 } });
    expect(pod.containers[0]!.volumeMounts).toContainEqual({ name: 'ssh', mountPath: '/etc/kube-runbook-ssh', readOnly: true });
    // the Secret's files are root's: without fsGroup, uid 1000 could not read its own key
    expect(pod.securityContext.fsGroup).toBe(pod.securityContext.runAsGroup);
  });

  it("the Job's deadlines follow the runbook's faultTtl and maxDuration: SIGTERM leaves the rollback its whole time", async () => {
    const withSafety = (name: string, faultTtl: string, maxDuration: string) => {
      const rb = parse(readFileSync(`${root}runbooks/kubelet-partition.yaml`, 'utf8')) as {
        spec: { safety: Record<string, unknown>; rollback: { within?: string } };
      };
      Object.assign(rb.spec.safety, { faultTtl, maxDuration });
      const file = join(tmp, name);
      writeFileSync(file, stringify(rb));
      return file;
    };
    const short = jobOf(await objects(withSafety('short.yaml', '2m', '10m')));
    const long = jobOf(await objects(withSafety('long.yaml', '7m', '40m')));
    // the runbook's rollback.within: waited for before remediations are undone
    const rb = parse(readFileSync(`${root}runbooks/kubelet-partition.yaml`, 'utf8')) as { spec: { rollback: { within: string } } };
    const within = parseDuration(rb.spec.rollback.within)! / 1000;
    const grace = (j: typeof short) => j.spec.template.spec.terminationGracePeriodSeconds;
    expect(grace(short)).toBeGreaterThanOrEqual(2 * 60 + within);
    expect(grace(long) - grace(short)).toBe(5 * 60);
    for (const [j, max] of [
      [short, 10 * 60],
      [long, 40 * 60],
    ] as const)
      expect(j.spec.activeDeadlineSeconds).toBeGreaterThanOrEqual(max + grace(j));
    expect(long.spec.activeDeadlineSeconds - short.spec.activeDeadlineSeconds).toBe(30 * 60 + 5 * 60);
  });

  it('the executor keeps off the nodes the runbook faults', async () => {
    const inv = parse(readFileSync(inventory, 'utf8')) as { spec: { nodes: { name: string; roles?: string[] }[] } };
    // kubelet-partition cuts off one worker ({role: worker, count: 1}): the inventory's first
    const target = inv.spec.nodes.find((n) => n.roles?.includes('worker'))!.name;
    const pod = podOf(await objects('kubelet-partition.yaml'));
    expect(pod.affinity?.nodeAffinity.requiredDuringSchedulingIgnoredDuringExecution.nodeSelectorTerms).toEqual([
      { matchFields: [{ key: 'metadata.name', operator: 'NotIn', values: [target] }] },
    ]);
  });

  it('the runbook ConfigMap is immutable and named by its content; each rendering names a new Job, one rendering applied twice is one run', async () => {
    const a = await objects('kubelet-partition.yaml', {}, 'n1');
    const again = await objects('kubelet-partition.yaml', {}, 'n1');
    const b = await objects('kubelet-partition.yaml');
    const c = await objects('kubelet-partition.yaml');
    const config = (objs: Obj[]) =>
      objs.find((o) => o.kind === 'ConfigMap' && 'data' in o) as unknown as { metadata: { name: string }; immutable?: boolean };
    expect(config(a).immutable).toBe(true);
    expect(podOf(a).volumes).toContainEqual({ name: 'config', configMap: { name: config(a).metadata.name } });
    expect(config(b).metadata.name).toBe(config(a).metadata.name);
    expect(jobOf(again).metadata.name).toBe(jobOf(a).metadata.name);
    expect(new Set([jobOf(a), jobOf(b), jobOf(c)].map((j) => j.metadata.name)).size).toBe(3);
    for (const j of [a, b, c].map(jobOf)) expect(j.metadata.name).toMatch(/^kube-runbook-kubelet-partition-[0-9a-f]{8}$/);
    const edited = join(tmp, 'edited.yaml');
    writeFileSync(edited, readFileSync(`${root}runbooks/kubelet-partition.yaml`, 'utf8') + '# edited\n');
    expect(config(await objects(edited)).metadata.name).not.toBe(config(a).metadata.name);
  });

  it("refuses the node agents' namespace (it must stay privileged) with exit 2", async () => {
    const inv = parse(readFileSync(inventory, 'utf8')) as { spec: { transport: unknown } };
    inv.spec.transport = { type: 'agent', namespace: 'kube-runbook-agent' };
    const file = join(tmp, 'agent-inventory.yaml');
    writeFileSync(file, stringify(inv));
    await expect(objects('kubelet-partition.yaml', { inventory: file, namespace: 'kube-runbook-agent' })).rejects.toMatchObject({
      exit: 2,
      message: expect.stringContaining(`--namespace "kube-runbook-agent" is the node agents' namespace`),
    });
  });

  it('refuses a bad schedule or namespace with exit 2', async () => {
    await expect(objects('kubelet-partition.yaml', { schedule: 'weekly' })).rejects.toMatchObject({
      exit: 2,
      message: expect.stringContaining('--schedule "weekly"'),
    });
  });
});

describe('kube-runbook manifests: the grants that give more than they read like', () => {
  const loadRunbook = join(tmp, 'load.yaml');
  writeFileSync(
    loadRunbook,
    stringify({
      apiVersion: 'kube-runbook/v1',
      kind: 'Runbook',
      metadata: { name: 'load' },
      spec: {
        safety: { allowContexts: ['lab'], faultTtl: '3m' },
        steps: [
          {
            name: 'load',
            action: 'load-apiserver',
            with: {
              qps: 10,
              concurrency: 2,
              identity: 'existing',
              as: 'default/load',
              requests: [{ verb: 'list', resource: 'pods', weight: 1 }],
            },
          },
        ],
      },
    }),
  );
  const warnings = async (file: string, inv = inventory) =>
    (await renderManifests(file, { inventory: inv, namespace: 'kube-runbook', image: 'example/kube-runbook:test' })).warnings.filter((w) =>
      w.startsWith('grants '),
    );

  it('a runbook with load-apiserver: a warning that it may impersonate, naming the rule and why', async () => {
    const w = await warnings(loadRunbook);
    expect(w).toContainEqual(
      expect.stringMatching(/^grants impersonate serviceaccounts load in default: acts as load: whatever that identity may do, it may$/),
    );
    expect(w).toContainEqual(expect.stringMatching(/^grants create namespaces \(cluster-wide\): makes namespaces with any labels/));
  });

  it('a plain runbook: no such warning', async () => {
    expect(await warnings(`${root}runbooks/kubelet-partition.yaml`)).toEqual([]);
  });

  it("with node agents: running pods and reading Secrets in the agents' namespace are named", async () => {
    const inv = parse(readFileSync(inventory, 'utf8')) as { spec: { transport: unknown } };
    inv.spec.transport = { type: 'agent', namespace: 'kr-agents' };
    const file = join(tmp, 'agent-inventory-warn.yaml');
    writeFileSync(file, stringify(inv));
    const w = await warnings(`${root}runbooks/kubelet-partition.yaml`, file);
    expect(w).toContainEqual(expect.stringMatching(/^grants create pods in kr-agents: runs pods in kr-agents: .*root on the nodes$/));
    expect(w).toContainEqual(expect.stringMatching(/^grants list secrets in kr-agents: reads every Secret of kr-agents/));
  });

  it("the agents' Role reads Leases and writes none: the run Lease's name is new each run, so RBAC cannot name it", async () => {
    const inv = parse(readFileSync(inventory, 'utf8')) as { spec: { transport: unknown } };
    inv.spec.transport = { type: 'agent', namespace: 'kr-agents' };
    const file = join(tmp, 'agent-inventory-role.yaml');
    writeFileSync(file, stringify(inv));
    const { yaml, warnings } = await agentManifests({ inventory: file });
    const role = parseAllDocuments(yaml)
      .map((d) => d.toJS() as Obj)
      .find((o) => o.kind === 'Role')!;
    // the one warning: what the namespace is, not what the agents may do
    expect(warnings).toEqual([
      expect.stringMatching(/^namespace kr-agents admits privileged pods: whoever may create pods, .* is root on the nodes/),
    ]);
    expect(role.rules!.filter((r) => r.resources?.includes('leases'))).toEqual([
      { apiGroups: ['coordination.k8s.io'], resources: ['leases'], verbs: ['get'] },
    ]);
    expect(role.rules!.flatMap((r) => r.resources)).not.toContain('secrets');
    // their one right outside their namespace: get on the halt, by name, where it is
    const halt = parseAllDocuments(yaml)
      .map((d) => d.toJS() as Obj & { subjects?: unknown[] })
      .filter((o) => o.metadata.name === 'kube-runbook-agent-halt');
    expect(halt.map((o) => [o.kind, o.metadata.namespace])).toEqual([
      ['Role', 'kube-system'],
      ['RoleBinding', 'kube-system'],
    ]);
    expect(halt[0]!.rules).toEqual([
      { apiGroups: ['coordination.k8s.io'], resources: ['leases'], resourceNames: ['kube-runbook-halt'], verbs: ['get'] },
    ]);
    expect(halt[1]!.subjects).toEqual([{ kind: 'ServiceAccount', name: 'kube-runbook-agent', namespace: 'kr-agents' }]);
  });

  it("a runbook locked outside kube-system: its Job reads the cluster's halt and its lock namespace's, each by name", async () => {
    const rb = parse(readFileSync(`${root}runbooks/kubelet-partition.yaml`, 'utf8')) as { spec: { safety: Record<string, unknown> } };
    rb.spec.safety.lockNamespace = 'kr-locks';
    const file = join(tmp, 'locked-elsewhere.yaml');
    writeFileSync(file, stringify(rb));
    const halts = (await objects(file))
      .filter((o) => o.kind === 'Role')
      .flatMap((o) => (o.rules ?? []).filter((r) => r.resourceNames?.includes('kube-runbook-halt')).map((r) => [o.metadata.namespace, r]));
    const read = { apiGroups: ['coordination.k8s.io'], resources: ['leases'], resourceNames: ['kube-runbook-halt'], verbs: ['get'] };
    expect(halts).toEqual([
      ['kr-locks', read],
      ['kube-system', read],
    ]);
  });

  it("the agents read the cluster's halt and each --halt-namespace's, by name", async () => {
    const inv = parse(readFileSync(inventory, 'utf8')) as { spec: { transport: unknown } };
    inv.spec.transport = { type: 'agent', namespace: 'kr-agents' };
    const file = join(tmp, 'agent-inventory-halts.yaml');
    writeFileSync(file, stringify(inv));
    const { yaml } = await agentManifests({ inventory: file, haltNamespace: ['kr-locks', 'kube-system'] });
    const halt = parseAllDocuments(yaml)
      .map((d) => d.toJS() as Obj)
      .filter((o) => o.metadata.name === 'kube-runbook-agent-halt');
    expect(halt.map((o) => [o.kind, o.metadata.namespace])).toEqual([
      ['Role', 'kube-system'],
      ['RoleBinding', 'kube-system'],
      ['Role', 'kr-locks'],
      ['RoleBinding', 'kr-locks'],
    ]);
    await expect(agentManifests({ inventory: file, haltNamespace: ['Not_A_Namespace'] })).rejects.toMatchObject({ code: 'BAD_NAMESPACE' });
  });

  it('Leases in kube-system: written only by name (the run lock), created, listed and watched, the halt read by name', async () => {
    const leases = (await objects('kubelet-partition.yaml'))
      .filter((o) => o.metadata.namespace === 'kube-system')
      .flatMap((o) => o.rules ?? [])
      .filter((r) => r.resources?.includes('leases'));
    for (const r of leases.filter((r) => r.verbs.some((v) => ['update', 'patch', 'delete'].includes(v))))
      expect(r.resourceNames).toEqual(['kube-runbook-run-lock']);
    // get twice: the run lock's and the halt's, each by name
    expect(leases.flatMap((r) => r.verbs).sort()).toEqual(['create', 'get', 'get', 'list', 'update', 'watch']);
  });
});
