import { describe, expect, it } from 'vitest';
import { registryOf } from '../contract/registry.js';
import { Inventory } from '../inventory/schema.js';
import { Runbook } from '../runbook/schema.js';
import { recordingAction } from '../testing/fake-modules.js';
import { baseRunbook, testInventory } from '../testing/engine-harness.js';
import { draftPlan } from './plan.js';
import { buildPlan, staticProblems } from './static-checks.js';

const fault = recordingAction('fault', []);
const picky = recordingAction('picky', []);
picky.meta = { ...picky.meta, layouts: { kubeadm: 'works', k3s: { refused: 'k3s has no such thing' }, lab: 'works too' } };
const registry = registryOf([fault, picky], []);

const inputOf = (spec: Record<string, unknown>, inventory: Record<string, unknown> = {}) => ({
  runbook: Runbook.parse(baseRunbook(spec)),
  file: 't.yaml',
  inventory: Inventory.parse({ ...testInventory(), spec: { ...testInventory().spec, ...inventory } }),
  registry,
});
const problemsOf = async (spec: Record<string, unknown>, inventory: Record<string, unknown> = {}, context?: string) =>
  staticProblems(await draftPlan(inputOf(spec, inventory)), { context });

describe('the static checks: what plan and preflight refuse without a cluster, each at its place in the runbook', () => {
  it('layouts: an action refused on the inventory layout, at its `action`; fine on the layouts it works on', async () => {
    const steps = [{ wait: '1s' }, { action: 'picky', with: { nodes: { names: ['node-1'] } } }];
    expect(await problemsOf({ steps }, { layout: 'k3s', transport: { type: 'local' } })).toEqual([
      {
        check: 'layouts',
        code: 'LAYOUT_UNSUPPORTED',
        doc: 'runbook',
        path: ['spec', 'steps', 1, 'action'],
        message: 'picky is refused on the inventory\'s layout "k3s": k3s has no such thing (it works on kubeadm, lab)',
      },
    ]);
    expect(await problemsOf({ steps })).toEqual([]);
    await expect(buildPlan(inputOf({ steps }, { layout: 'k3s', transport: { type: 'local' } }))).rejects.toMatchObject({
      code: 'LAYOUT_UNSUPPORTED',
      exit: 2,
    });
  });

  it('nodes: every name the inventory lacks and a role it has no node of, each at its own place', async () => {
    const found = await problemsOf({
      steps: [{ action: 'fault', with: { nodes: { names: ['node-9', 'node-1', 'node-8'] } } }],
      remediation: [{ action: 'fault', with: { nodes: { role: 'etcd' } } }],
    });
    expect(found.map((p) => [p.code, p.path.join('.')])).toEqual([
      ['NODE_NOT_IN_INVENTORY', 'spec.steps.0.with.nodes.names.0'],
      ['NODE_NOT_IN_INVENTORY', 'spec.steps.0.with.nodes.names.2'],
      ['ROLE_NOT_IN_INVENTORY', 'spec.remediation.0.with.nodes.role'],
    ]);
    expect(found[0]!.message).toBe('node "node-9" is not in the inventory (known: cp-1, node-1, node-2, node-3)');
    expect(found[2]!.message).toBe('no node of the inventory has the role "etcd" (roles it has: control-plane, worker)');
  });

  it('maxUnavailable: at the step that goes over, every problem of the plan in one refusal', async () => {
    const spec = {
      safety: { allowContexts: ['lab'] },
      steps: [
        { action: 'fault', with: { nodes: 'workers' } },
        { action: 'fault', with: { nodes: { names: ['node-7'] } } },
      ],
    };
    expect((await problemsOf(spec)).map((p) => [p.check, p.path.join('.')])).toEqual([
      ['nodes', 'spec.steps.1.with.nodes.names.0'],
      ['maxUnavailable', 'spec.steps.0.with.nodes'],
    ]);
    const e = await buildPlan(inputOf(spec)).catch((x: unknown) => x);
    expect(e).toMatchObject({ code: 'NODE_NOT_IN_INVENTORY', exit: 2, message: 'the plan is refused: 2 problems' });
    expect((e as { details: string[] }).details).toEqual([
      'spec.steps[1].with.nodes.names[0]: node "node-7" is not in the inventory (known: cp-1, node-1, node-2, node-3)',
      expect.stringMatching(
        /^spec\.steps\[0\]\.with\.nodes: fault on node-1, node-2, node-3: 3 of 3 worker nodes would be faulted at once/,
      ),
    ]);
  });

  it("context: the inventory's context against allowContexts, a CONTEXT@SERVER pattern by its context", async () => {
    const spec = (allowContexts: string[]) => ({ safety: { allowContexts }, steps: [{ wait: '1s' }] });
    expect(await problemsOf(spec(['staging-*', 'lab@https://10.0.0.1:6443']), {}, 'lab')).toEqual([]);
    expect(await problemsOf(spec(['staging-*']), {}, undefined)).toEqual([]);
    const [p, ...rest] = await problemsOf(spec(['staging-*']), {}, 'prod');
    expect(rest).toEqual([]);
    expect(p).toMatchObject({ check: 'context', code: 'CONTEXT_NOT_ALLOWED', path: ['spec', 'safety', 'allowContexts'] });
    // the preflight stage: plan and run leave it to preflight, which checks the context actually used
    await expect(buildPlan(inputOf(spec(['staging-*'])), { env: { context: 'prod' } })).resolves.toBeDefined();
  });
});
