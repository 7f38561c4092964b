import { describe, expect, it } from 'vitest';
import { registryOf } from '../contract/registry.js';
import { Inventory } from '../inventory/schema.js';
import { parseKubeVersion } from '../kube/versions.js';
import { renderPlan } from '../report/plan-text.js';
import { Runbook } from '../runbook/schema.js';
import { recordingAction } from '../testing/fake-modules.js';
import { baseRunbook, testInventory } from '../testing/engine-harness.js';
import { buildPlan } from './static-checks.js';

const newer = { ...recordingAction('disable-taint-eviction', [], { kind: 'remediation' }) };
newer.meta = { ...newer.meta, minKubernetesMinor: 29 };
const older = recordingAction('stop-controller-manager', [], { kind: 'remediation' });
const registry = registryOf([newer, older], []);

const runbook = Runbook.parse(
  baseRunbook({
    steps: [{ wait: '1s' }],
    remediation: [
      {
        name: 'freeze',
        action: 'disable-taint-eviction',
        with: { nodes: 'control-plane' },
        orElse: { action: 'stop-controller-manager', with: { nodes: 'control-plane' } },
      },
    ],
  }),
);
const plan = (gitVersion?: string) =>
  buildPlan({
    runbook,
    file: 't.yaml',
    inventory: Inventory.parse(testInventory()),
    registry,
    serverVersion: parseKubeVersion(gitVersion),
  });

describe('orElse: an action and the one used where the server is too old for it', () => {
  it('a server new enough keeps the action', async () => {
    const r = (await plan('v1.37.2')).remediation[0]!;
    expect([r.actionId, r.name, r.substituted, r.orElse]).toEqual(['disable-taint-eviction', 'freeze', undefined, undefined]);
  });

  it('an older server takes orElse, and the plan says why', async () => {
    const p = await plan('v1.20.2');
    const r = p.remediation[0]!;
    expect(r.actionId).toBe('stop-controller-manager');
    expect(r.targets?.map((t) => t.name)).toEqual(['cp-1']);
    expect(r.substituted).toBe(
      'disable-taint-eviction needs Kubernetes 1.29 or newer and the server is v1.20.2: using stop-controller-manager',
    );
    expect(renderPlan(p)).toContain(
      '(disable-taint-eviction needs Kubernetes 1.29 or newer and the server is v1.20.2: using stop-controller-manager)',
    );
  });

  it('without the server version the plan keeps the action and says orElse is decided at run time', async () => {
    const p = await plan(undefined);
    expect(p.remediation[0]).toMatchObject({ actionId: 'disable-taint-eviction', orElse: 'stop-controller-manager' });
    expect(renderPlan(p)).toContain('or stop-controller-manager, where the server is too old for disable-taint-eviction');
  });
});

describe('spec.safety.maxUnavailable', () => {
  const fault = recordingAction('run-command', []);
  const reg = registryOf([fault], []);
  const defaults = { safety: { allowContexts: ['lab'] } };
  const planOf = (spec: Record<string, unknown>) =>
    buildPlan({
      runbook: Runbook.parse(baseRunbook({ ...defaults, ...spec })),
      file: 't.yaml',
      inventory: Inventory.parse(testInventory()),
      registry: reg,
    });

  it('refuses, at plan time, more workers faulted at once than the default (50%, rounded up: 2 of 3)', async () => {
    await expect(planOf({ steps: [{ action: 'run-command', with: { nodes: 'workers' } }] })).rejects.toMatchObject({
      code: 'MAX_UNAVAILABLE',
      exit: 2,
      message: expect.stringContaining(
        'spec.steps[0].with.nodes: run-command on node-1, node-2, node-3: 3 of 3 worker nodes would be faulted at once',
      ),
    });
    await expect(planOf({ steps: [{ action: 'run-command', with: { nodes: { role: 'worker', count: 2 } } }] })).resolves.toBeDefined();
  });

  it('counts faults until a revert step takes them back, across steps and parallel children', async () => {
    const two = (names: string[]) => ({ action: 'run-command', with: { nodes: { names } } });
    await expect(planOf({ steps: [{ name: 'a', ...two(['node-1', 'node-2']) }, two(['node-3'])] })).rejects.toMatchObject({
      message: expect.stringContaining('spec.steps[1].with.nodes: run-command on node-3: 3 of 3 worker nodes'),
    });
    await expect(planOf({ steps: [{ name: 'a', ...two(['node-1', 'node-2']) }, { revert: 'a' }, two(['node-3'])] })).resolves.toBeDefined();
    await expect(planOf({ steps: [{ parallel: [two(['node-1']), two(['node-2', 'node-3'])] }] })).rejects.toMatchObject({
      message: expect.stringContaining('spec.steps[0].parallel[1].with.nodes: '),
    });
  });

  it('one control-plane node by default; limits as counts or percentages; protective steps do not count', async () => {
    const inv = testInventory(['cp-1', 'cp-2', 'node-1']);
    const p = (spec: Record<string, unknown>) =>
      buildPlan({
        runbook: Runbook.parse(baseRunbook({ ...defaults, ...spec })),
        file: 't.yaml',
        inventory: Inventory.parse(inv),
        registry: reg,
      });
    await expect(p({ steps: [{ action: 'run-command', with: { nodes: 'control-plane' } }] })).rejects.toMatchObject({
      message: expect.stringContaining(
        '2 of 2 control-plane nodes would be faulted at once (cp-1, cp-2), more than spec.safety.maxUnavailable.controlPlane allows (1)',
      ),
    });
    await expect(
      p({
        safety: { allowContexts: ['lab'], maxUnavailable: { controlPlane: 2 } },
        steps: [{ action: 'run-command', with: { nodes: 'control-plane' } }],
      }),
    ).resolves.toBeDefined();
    await expect(
      p({
        safety: { allowContexts: ['lab'], maxUnavailable: { controlPlane: '100%' } },
        steps: [{ action: 'run-command', with: { nodes: 'control-plane' } }],
      }),
    ).resolves.toBeDefined();
    await expect(p({ steps: [{ action: 'run-command', with: { nodes: 'control-plane' }, revertLast: true }] })).resolves.toBeDefined();
    expect(() => Runbook.parse(baseRunbook({ safety: { maxUnavailable: { worker: '150%' } }, steps: [{ wait: '1s' }] }))).toThrow();
  });
});
