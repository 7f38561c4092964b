import { describe, expect, it } from 'vitest';
import type { SlimDeviceTaintRule, SlimResourceClaim, SlimResourceSlice } from '../kube/dra.js';
import { deviceTaintEvictions, toleratedMs } from './device-taints.js';

const T0 = 1_000_000;
const taint = { key: 'example.com/broken', effect: 'NoExecute', timeAdded: T0 };

const claim = (name: string, device: string, pod: string, tolerations: SlimResourceClaim['allocated'][0]['tolerations'] = []) => ({
  namespace: 'default',
  name,
  allocated: [{ driver: 'd.example.com', pool: 'p', device, tolerations }],
  reservedFor: [{ name: pod, uid: `uid-${pod}` }],
});
const rule = (name: string, o: Partial<SlimDeviceTaintRule> = {}): SlimDeviceTaintRule => ({
  name,
  selects: true,
  driver: 'd.example.com',
  taint,
  ...o,
});
const run = (claims: SlimResourceClaim[], rules: SlimDeviceTaintRule[], slices: SlimResourceSlice[] = []) =>
  deviceTaintEvictions({
    now: T0 + 5_000,
    claims,
    slices,
    rules,
    nodeOf: (_ns, name, uid) => (uid === `uid-${name}` && name !== 'gone' ? `node-of-${name}` : undefined),
  }).map((p) => [p.key, p.node, p.evictAt! - T0, p.why]);

describe('device taint evictions (pkg/controller/devicetainteviction)', () => {
  it("evicts at the taint's timeAdded + the smallest tolerationSeconds of the NoExecute tolerations that match it", () => {
    const tol = [
      { key: 'example.com/broken', operator: 'Exists', effect: 'NoExecute', seconds: 60 },
      { operator: 'Exists', effect: 'NoExecute', seconds: 20 },
      // no effect: the controller counts only tolerations whose effect is NoExecute
      { operator: 'Exists', seconds: 1 },
    ];
    expect(toleratedMs(tol, taint)).toBe(20_000);
    expect(toleratedMs([{ operator: 'Exists', effect: 'NoExecute', seconds: -5 }], taint)).toBe(0);
    expect(toleratedMs([{ operator: 'Exists', effect: 'NoExecute' }, ...tol], taint)).toBe(Infinity);
    expect(toleratedMs([{ key: 'example.com/broken', value: 'x', effect: 'NoExecute' }], taint)).toBe(0);
    expect(toleratedMs([{ operator: 'Gt', value: '1', effect: 'NoExecute' }], { ...taint, value: '2' })).toBe(0);
  });

  it('gives each reserved pod the earliest of its claims, names the rule and the device, leaves out pods not counted', () => {
    const claims = [
      claim('a', 'gpu-0', 'web-1', [{ operator: 'Exists', effect: 'NoExecute', seconds: 30 }]),
      claim('b', 'gpu-1', 'web-1'),
      claim('c', 'gpu-2', 'web-2', [{ operator: 'Exists', effect: 'NoExecute' }]),
      claim('d', 'gpu-0', 'gone'),
    ];
    expect(
      run(claims, [rule('r1', { device: 'gpu-0' }), rule('r2', { device: 'gpu-1', taint: { ...taint, timeAdded: T0 + 10_000 } })]),
    ).toEqual([['default/web-1', 'node-of-web-1', 10_000, 'device taint r2 on d.example.com/p/gpu-1']]);
    // a rule without a selector selects nothing; one of another driver, or not NoExecute, does not evict
    expect(
      run(claims, [
        rule('none', { selects: false, driver: undefined }),
        rule('other', { driver: 'x' }),
        rule('soft', { taint: { ...taint, effect: 'NoSchedule' } }),
      ]),
    ).toEqual([]);
  });

  it('reads a NoExecute taint of the device in its ResourceSlice, and counts from now when it has no timeAdded', () => {
    const slices = [
      { name: 's1', driver: 'd.example.com', pool: 'p', devices: [{ name: 'gpu-0', taints: [{ key: 'k', effect: 'NoExecute' }] }] },
    ];
    expect(run([claim('a', 'gpu-0', 'web-1')], [], slices)).toEqual([
      ['default/web-1', 'node-of-web-1', 5_000, 'device taint k of ResourceSlice s1 on d.example.com/p/gpu-0'],
    ]);
  });
});
