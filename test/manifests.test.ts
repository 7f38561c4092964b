import { readdirSync, readFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { parseAllDocuments, parse } from 'yaml';
import { describe, expect, it } from 'vitest';
import { renderManifests } from '../src/cli/manifests.js';
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

async function objects(file: string, o: { schedule?: string; reportConfigmap?: boolean } = {}): Promise<Obj[]> {
  const { yaml } = await renderManifests(`${root}runbooks/${file}`, { inventory, namespace: 'kube-runbook', image: 'example/kube-runbook:test', ...o });
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
  const metas = [...(await Promise.all([...actions].map((id) => defaultRegistry.action(id)))), ...(await Promise.all([...probes].map((id) => defaultRegistry.probe(id))))];
  for (const m of metas)
    for (const a of m.meta.access)
      for (const verb of a.verbs) out.add('nonResourceURL' in a ? `url|${a.nonResourceURL}|${verb}` : `${a.apiGroup}|${a.resource}|${verb}`);
  return out;
}

const granted = (rules: Rule[]) =>
  rules.flatMap((r) =>
    r.nonResourceURLs
      ? r.nonResourceURLs.flatMap((u) => r.verbs.map((v) => `url|${u}|${v}`))
      : (r.apiGroups ?? []).flatMap((g) => (r.resources ?? []).flatMap((res) => r.verbs.map((v) => `${g}|${res}|${v}`))),
  );

describe('kube-runbook manifests: least privilege from the modules’ own declarations', () => {
  it('ships runbooks to check', () => expect(shipped.length).toBeGreaterThan(3));

  for (const file of shipped)
    it(`${file}: no wildcard, nothing but what its modules declare, read-only`, async () => {
      const objs = await objects(file);
      const roles = objs.filter((o) => o.kind === 'ClusterRole' || o.kind === 'Role');
      expect(roles.filter((o) => o.kind === 'ClusterRole')).toHaveLength(1);
      // the run lock: the one write, to one Lease in kube-system (created once, then read and renewed by name)
      const lockNs = roles.filter((r) => r.kind === 'Role' && r.metadata.namespace === 'kube-system').flatMap((r) => r.rules ?? []);
      const isLeases = (r: Rule) => r.apiGroups?.[0] === 'coordination.k8s.io' && r.resources?.[0] === 'leases';
      expect(lockNs.some((r) => isLeases(r) && !r.resourceNames && r.verbs.includes('create'))).toBe(true);
      expect(lockNs).toContainEqual({ apiGroups: ['coordination.k8s.io'], resources: ['leases'], resourceNames: ['kube-runbook-run-lock'], verbs: ['get', 'update'] });
      const rules = roles
        .flatMap((r) => r.rules ?? [])
        .filter((r) => !r.resourceNames)
        .map((r) => (lockNs.includes(r) && isLeases(r) ? { ...r, verbs: r.verbs.filter((v) => v !== 'create') } : r))
        .filter((r) => r.verbs.length);
      expect(rules.length).toBeGreaterThan(0);
      for (const r of rules) for (const list of [r.apiGroups, r.resources, r.nonResourceURLs, r.verbs]) expect(list ?? []).not.toContain('*');
      const allowed = await declared(file);
      for (const g of granted(rules)) expect(allowed, `${file} grants ${g}, which no module of it declares`).toContain(g);
      for (const r of rules) expect(r.verbs.every((v) => ['get', 'list', 'watch'].includes(v)), JSON.stringify(r)).toBe(true);
    });

  it('kubelet-partition: exactly these permissions', async () => {
    const objs = await objects('kubelet-partition.yaml');
    const roles = objs.filter((o) => o.kind === 'ClusterRole' || o.kind === 'Role').map((o) => ({ kind: o.kind, namespace: o.metadata.namespace, rules: o.rules }));
    expect(roles).toEqual([
      {
        kind: 'ClusterRole',
        namespace: undefined,
        rules: [
          { apiGroups: [''], resources: ['nodes'], verbs: ['list', 'watch'] },
          { apiGroups: [''], resources: ['pods'], verbs: ['list', 'watch'] },
          { nonResourceURLs: ['/version'], verbs: ['get'] },
        ],
      },
      { kind: 'Role', namespace: 'default', rules: [{ apiGroups: [''], resources: ['endpoints'], verbs: ['get'] }] },
      { kind: 'Role', namespace: 'kube-node-lease', rules: [{ apiGroups: ['coordination.k8s.io'], resources: ['leases'], verbs: ['list', 'watch'] }] },
      {
        kind: 'Role',
        namespace: 'kube-system',
        rules: [
          { apiGroups: ['coordination.k8s.io'], resources: ['leases'], verbs: ['list', 'watch', 'create'] },
          { apiGroups: ['coordination.k8s.io'], resources: ['leases'], resourceNames: ['kube-runbook-run-lock'], verbs: ['get', 'update'] },
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
      'Job',
    ]);
  });

  it('a schedule makes a CronJob that never runs two at once, and the pod runs in-cluster with the mounted files', async () => {
    const objs = await objects('kubelet-partition.yaml', { schedule: '0 3 * * 1' });
    const cron = objs.find((o) => o.kind === 'CronJob')!;
    expect(cron.spec).toMatchObject({ schedule: '0 3 * * 1', concurrencyPolicy: 'Forbid', jobTemplate: { spec: { backoffLimit: 0 } } });
    const cm = objs.find((o) => o.kind === 'ConfigMap') as unknown as { data: Record<string, string> };
    expect(cm.data['runbook.yaml']).toBe(readFileSync(`${root}runbooks/kubelet-partition.yaml`, 'utf8'));
    expect(cm.data['inventory.yaml']).toBe(readFileSync(inventory, 'utf8'));
    const pod = (cron.spec as { jobTemplate: { spec: { template: { spec: { serviceAccountName: string; containers: { args: string[] }[] } } } } }).jobTemplate.spec.template.spec;
    expect(pod.serviceAccountName).toBe('kube-runbook-kubelet-partition');
    expect(pod.containers[0]!.args).toEqual(['run', '/etc/kube-runbook/runbook.yaml', '--inventory', '/etc/kube-runbook/inventory.yaml', '--in-cluster', '--yes', '--output', 'json']);
  });

  it('--report-configmap grants create and patch of ConfigMaps in its namespace only, and passes the ConfigMap to run', async () => {
    const objs = await objects('kubelet-partition.yaml', { reportConfigmap: true });
    const role = objs.find((o) => o.kind === 'Role' && o.metadata.namespace === 'kube-runbook');
    expect(role?.rules).toEqual([{ apiGroups: [''], resources: ['configmaps'], verbs: ['create', 'patch'] }]);
    const job = objs.find((o) => o.kind === 'Job') as unknown as { spec: { template: { spec: { containers: { args: string[] }[] } } } };
    expect(job.spec.template.spec.containers[0]!.args.slice(-2)).toEqual(['--report-configmap', 'kube-runbook/kube-runbook-kubelet-partition-report']);
  });

  it('refuses a bad schedule or namespace with exit 2', async () => {
    await expect(objects('kubelet-partition.yaml', { schedule: 'weekly' })).rejects.toMatchObject({ exit: 2, message: expect.stringContaining('--schedule "weekly"') });
  });
});
