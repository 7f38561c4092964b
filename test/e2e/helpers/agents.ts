import { readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { KubeConfig, KubernetesObjectApi, PatchStrategy, type KubernetesObject } from '@kubernetes/client-node';
import { parse, parseAllDocuments, stringify } from 'yaml';
import { expect } from 'vitest';
import { LAB_AGENT_GROUP } from '../../../packages/lab/src/host/paths.js';
import { cli, coreApi, until, type LabInfo } from './lab.js';

/** The namespace the e2e tests run their node agents in. */
export const AGENT_NS = 'kr-agent';

/**
 * The lab's inventory with its workers reached through node agents in AGENT_NS (`transport` adds settings), written
 * as `<name>.yaml` beside the lab's own (its kubeconfig is named relative to the file); the file's path.
 */
export function agentInventory(lab: LabInfo, name = 'inventory-agent', transport: Record<string, unknown> = {}): string {
  const inv = parse(readFileSync(lab.inventoryFile, 'utf8')) as { spec: { nodes: { roles: string[]; transport?: unknown }[] } };
  for (const n of inv.spec.nodes)
    if (n.roles.includes('worker'))
      n.transport = { type: 'agent', namespace: AGENT_NS, enter: 'mount', startTimeout: '45s', runAsGroup: LAB_AGENT_GROUP, ...transport };
  const file = join(lab.stateDir, `${name}.yaml`);
  writeFileSync(file, stringify(inv));
  return file;
}

/** Applies what `agent manifests -i inventory` prints (namespace, RBAC), by server-side apply. */
export async function applyAgentManifests(lab: LabInfo, inventory: string): Promise<void> {
  const kc = new KubeConfig();
  kc.loadFromFile(lab.kubeconfig);
  const objects = KubernetesObjectApi.makeApiClient(kc);
  const r = await cli(['agent', 'manifests', '-i', inventory]);
  expect(r.code, r.stderr).toBe(0);
  for (const d of parseAllDocuments(r.stdout))
    await objects.patch(d.toJS() as KubernetesObject, undefined, undefined, 'kube-runbook-e2e', true, PatchStrategy.ServerSideApply);
}

/** The agent pods in AGENT_NS, by name. */
async function agentPods(lab: LabInfo): Promise<string[]> {
  return (await coreApi(lab).listNamespacedPod({ namespace: AGENT_NS })).items.map((p) => p.metadata!.name!);
}

/** Waits until no agent pod is left in AGENT_NS (`why` ends the failure's message). */
export const agentPodsGone = (lab: LabInfo, why = '', timeoutMs = 60_000) =>
  until(`every agent pod gone${why}`, async () => (await agentPods(lab)).length === 0, timeoutMs, 500);
