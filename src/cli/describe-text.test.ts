import { describe, expect, it } from 'vitest';
import { defaultRegistry as registry } from '../engine/registry.js';
import { actionText, probeText } from './describe-text.js';

describe('describe as plain text', () => {
  it('fits every action and probe in a narrow terminal, without Markdown', async () => {
    const texts = [
      ...(await Promise.all(registry.ids('action').map(async (id) => actionText((await registry.action(id)).meta, 50)))),
      ...(await Promise.all(registry.ids('probe').map(async (id) => probeText((await registry.probe(id)).meta, 50)))),
    ];
    for (const text of texts) {
      const first = text.split('\n')[0]!;
      for (const line of text.split('\n')) expect(line.length, `${first}: ${line}`).toBeLessThanOrEqual(50);
      expect(text, first).not.toMatch(/`|\*\*|^\s*\||^#+ /m);
    }
  });

  it('keeps the words whole where they fit, and the facts of the Markdown', async () => {
    const text = actionText((await registry.action('starve-cpu')).meta, 72);
    expect(text).toMatch(/^action starve-cpu: fault, targets nodes\n/);
    expect(text).toMatch(/^ {2}quota +string, required\n {4,}how much CPU/m);
    expect(text).toContain('\nExample\n  with:\n    # nodes: control-plane\n    component: apiserver\n    quota: 10%\n');
    expect(text).toContain('\nHow it is undone\n  writes back the quota and period that were set before (usually none:\n  max);');
    const probe = probeText((await registry.probe('node-leases')).meta, 72);
    expect(probe).toMatch(/^ {2}list, watch leases\.coordination\.k8s\.io\n {6}namespace kube-node-lease: /m);
  });
});
