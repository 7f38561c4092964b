import { mkdtempSync, mkdirSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { controllerEvictions, parseEvictions } from './controller-log.js';
import type { LabInfo } from '../host/info.js';

const SINCE = new Date(2026, 11, 2, 7, 55, 0).getTime();

describe("the controller-manager's eviction log lines", () => {
  it('counts the info lines from sinceMs on, at their local time, as the node that logged them', () => {
    const evictions = parseEvictions(
      [
        'I1202 07:54:59.000000    7440 taint_eviction.go:111] "Deleting pod" controller="taint-eviction-controller" pod="default/early"',
        'I1202 07:55:51.023950    7440 taint_eviction.go:111] "Deleting pod" controller="taint-eviction-controller" pod="default/web-1"',
        'E1202 07:55:56.000000    7440 other.go:1] "Deleting pod" controller="taint-eviction-controller" pod="default/not-info"',
        'I1202 07:55:57.000000    7440 taint_manager.go:106] NoExecuteTaintManager is deleting Pod: default/old-1',
      ].join('\n'),
      SINCE,
      'cp-1',
    );
    expect(evictions).toEqual([
      { pod: 'default/web-1', at: new Date(SINCE + 51_024).toISOString(), from: 'cp-1' },
      { pod: 'default/old-1', at: new Date(SINCE + 57_000).toISOString(), from: 'cp-1' },
    ]);
  });

  it('takes the next year for a January line of a run that started in December', () => {
    const since = new Date(2026, 11, 31, 23, 59, 0).getTime();
    const [e] = parseEvictions(
      'I0101 00:00:10.000000 1 taint_manager.go:106] NoExecuteTaintManager is deleting Pod: default/x',
      since,
      'cp-1',
    );
    expect(e?.at).toBe(new Date(2027, 0, 1, 0, 0, 10).toISOString());
  });

  it("reads every control-plane node's log, and fails when one is missing rather than counting none", async () => {
    const stateDir = mkdtempSync(join(tmpdir(), 'kr-kcm-log-'));
    const lab = {
      instance: 'x',
      stateDir,
      nodes: [
        { name: 'cp-1', roles: ['control-plane', 'etcd'] },
        { name: 'cp-2', roles: ['control-plane', 'etcd'] },
        { name: 'node-1', roles: ['worker'] },
      ],
    } as unknown as LabInfo;
    const write = (node: string, text: string) => {
      const dir = join(stateDir, 'nodes', node, 'kube-controller-manager');
      mkdirSync(dir, { recursive: true });
      writeFileSync(join(dir, 'log'), text);
    };
    write('cp-2', 'I1202 07:56:00.000000 1 taint_eviction.go:111] "Deleting pod" controller="taint-eviction-controller" pod="default/a"\n');
    await expect(controllerEvictions(lab, SINCE)).rejects.toThrow(/cp-1\/kube-controller-manager\/log cannot be read \(ENOENT\)/);
    write('cp-1', '');
    expect(await controllerEvictions(lab, SINCE)).toEqual([{ pod: 'default/a', at: new Date(SINCE + 60_000).toISOString(), from: 'cp-2' }]);
  });
});
