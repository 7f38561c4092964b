import { mkdtempSync, mkdirSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { gzipSync } from 'node:zlib';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { controllerEvictions, controllerManagerLog, criKlogLines, evictionsIn, klogLines } from './controller-log.js';
import type { LabInfo } from '../host/info.js';

const SINCE = new Date(2026, 11, 2, 7, 55, 0).getTime();

describe("the controller-manager's eviction log lines", () => {
  it('counts the info lines from sinceMs on, at their local time, as the node that logged them', () => {
    const evictions = evictionsIn(
      klogLines(
        [
          'I1202 07:54:59.000000    7440 taint_eviction.go:111] "Deleting pod" controller="taint-eviction-controller" pod="default/early"',
          'I1202 07:55:51.023950    7440 taint_eviction.go:111] "Deleting pod" controller="taint-eviction-controller" pod="default/web-1"',
          'E1202 07:55:56.000000    7440 other.go:1] "Deleting pod" controller="taint-eviction-controller" pod="default/not-info"',
          'I1202 07:55:57.000000    7440 taint_manager.go:106] NoExecuteTaintManager is deleting Pod: default/old-1',
        ].join('\n'),
        SINCE,
      ),
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
    const [e] = evictionsIn(
      klogLines('I0101 00:00:10.000000 1 taint_manager.go:106] NoExecuteTaintManager is deleting Pod: default/x', since),
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
    await expect(controllerEvictions(lab, SINCE)).rejects.toThrow(
      /cp-1\/kube-controller-manager\/log cannot be read \(ENOENT\), nor a kube-controller-manager container log/,
    );
    write('cp-1', '');
    expect(await controllerEvictions(lab, SINCE)).toEqual([{ pod: 'default/a', at: new Date(SINCE + 60_000).toISOString(), from: 'cp-2' }]);
  });

  it("reads a static-pod control plane's container logs, every pod UID and restart, at the kubelet's times", async () => {
    const stateDir = mkdtempSync(join(tmpdir(), 'kr-kcm-cri-'));
    const lab = { instance: 'x', stateDir, nodes: [{ name: 'cp-1', roles: ['control-plane', 'etcd'] }] } as unknown as LabInfo;
    const write = (uid: string, file: string, text: string) => {
      const dir = join(stateDir, 'nodes', 'cp-1', 'pod-logs', `kube-system_kube-controller-manager-cp-1_${uid}`, 'kube-controller-manager');
      mkdirSync(dir, { recursive: true });
      writeFileSync(join(dir, file), text);
    };
    const at = (s: number) => new Date(SINCE + s * 1000).toISOString();
    write(
      'a1',
      '0.log',
      [
        `${at(-5)} stderr F I1202 00:00:00.000000 1 taint_eviction.go:111] "Deleting pod" controller="taint-eviction-controller" pod="default/before"`,
        // one klog line the kubelet cut in two parts
        `${at(30)} stderr P I1202 00:00:00.000000 1 taint_eviction.go:111] "Deleting pod" controller="taint-eviction-`,
        `${at(30)} stderr F controller" pod="default/web-1"`,
      ].join('\n'),
    );
    write(
      'b2',
      '1.log',
      `${at(40)} stderr F I1202 00:00:00.000000 1 taint_manager.go:106] NoExecuteTaintManager is deleting Pod: default/web-2\n`,
    );
    // rotated by the kubelet, the older one compressed; other files are not logs
    write(
      'b2',
      '1.log.20261202-075600',
      `${at(35)} stderr F I1202 00:00:00.000000 1 taint_manager.go:106] NoExecuteTaintManager is deleting Pod: default/rotated\n`,
    );
    const dir = join(stateDir, 'nodes', 'cp-1', 'pod-logs', 'kube-system_kube-controller-manager-cp-1_b2', 'kube-controller-manager');
    writeFileSync(
      join(dir, '1.log.20261202-075500.gz'),
      gzipSync(
        `${at(33)} stderr F I1202 00:00:00.000000 1 taint_manager.go:106] NoExecuteTaintManager is deleting Pod: default/compressed\n`,
      ),
    );
    writeFileSync(
      join(dir, 'notes.txt'),
      `${at(34)} stderr F I1202 00:00:00.000000 1 taint_manager.go:106] NoExecuteTaintManager is deleting Pod: default/not-a-log\n`,
    );
    expect(await controllerEvictions(lab, SINCE)).toEqual([
      { pod: 'default/web-1', at: at(30), from: 'cp-1' },
      { pod: 'default/compressed', at: at(33), from: 'cp-1' },
      { pod: 'default/rotated', at: at(35), from: 'cp-1' },
      { pod: 'default/web-2', at: at(40), from: 'cp-1' },
    ]);
    expect(criKlogLines('not a CRI line\n')).toEqual([]);
    // every line, in the order written across the pods' files, for the readers of other lines than evictions
    expect((await controllerManagerLog(lab, 'cp-1', SINCE)).map((l) => l.at - SINCE)).toEqual([-5000, 30_000, 33_000, 35_000, 40_000]);
  });
});
