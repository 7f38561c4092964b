import { describe, expect, it } from 'vitest';
import { registryOf } from '../contract/registry.js';
import { Inventory } from '../inventory/schema.js';
import { parseKubeVersion } from '../kube/versions.js';
import { renderPlan } from '../report/plan-text.js';
import { Runbook } from '../runbook/schema.js';
import { recordingAction } from '../testing/fake-modules.js';
import { baseRunbook, testInventory } from '../testing/engine-harness.js';
import { buildPlan } from './plan.js';

const newer = { ...recordingAction('disable-taint-eviction', [], { kind: 'remediation' }) };
newer.meta = { ...newer.meta, minKubernetesMinor: 29 };
const older = recordingAction('stop-controller-manager', [], { kind: 'remediation' });
const registry = registryOf([newer, older], []);

const runbook = Runbook.parse(
  baseRunbook({
    steps: [{ wait: '1s' }],
    remediation: [{ name: 'freeze', action: 'disable-taint-eviction', with: { nodes: 'control-plane' }, orElse: { action: 'stop-controller-manager', with: { nodes: 'control-plane' } } }],
  }),
);
const plan = (gitVersion?: string) =>
  buildPlan({ runbook, file: 't.yaml', inventory: Inventory.parse(testInventory()), registry, serverVersion: parseKubeVersion(gitVersion) });

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
    expect(r.substituted).toBe('disable-taint-eviction needs Kubernetes 1.29 or newer and the server is v1.20.2: using stop-controller-manager');
    expect(renderPlan(p)).toContain('(disable-taint-eviction needs Kubernetes 1.29 or newer and the server is v1.20.2: using stop-controller-manager)');
  });

  it('without the server version the plan keeps the action and says orElse is decided at run time', async () => {
    const p = await plan(undefined);
    expect(p.remediation[0]).toMatchObject({ actionId: 'disable-taint-eviction', orElse: 'stop-controller-manager' });
    expect(renderPlan(p)).toContain('or stop-controller-manager, where the server is too old for disable-taint-eviction');
  });
});
