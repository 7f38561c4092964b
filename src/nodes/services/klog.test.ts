import { describe, expect, it } from 'vitest';
import { parseKlogLine, taintEvictedPod } from './klog.js';

describe('klog text lines', () => {
  it('reads the header to the microsecond and keeps the message; other lines are none', () => {
    expect(parseKlogLine('E1202 07:55:51.023950    7440 taint_eviction.go:111] "Deleting pod" pod="default/web-1"')).toEqual({
      severity: 'E',
      month: 12,
      day: 2,
      hour: 7,
      minute: 55,
      second: 51,
      micros: 23_950,
      message: '"Deleting pod" pod="default/web-1"',
    });
    expect(parseKlogLine('W1202 07:55:57.000000    7440 garbage line without a header')).toBeUndefined();
  });

  it.each([
    ['"Deleting pod" controller="taint-eviction-controller" pod="default/web-1"', 'default/web-1'],
    [
      '"Deleting pod" logger="taint-eviction-controller" controller="taint-eviction-controller" pod="default/web-2:0b6f-11"',
      'default/web-2',
    ],
    ['"Deleting pod" controller="taint-eviction-controller" pod={"name":"web-3","namespace":"kube-system"}', 'kube-system/web-3'],
    ['NoExecuteTaintManager is deleting Pod: default/old-1', 'default/old-1'],
    ['"Deleting pod" controller="device-taint-eviction-controller" pod="default/dra"', undefined],
    ['"Deleting pod" controller="taint-eviction-controller" pod={"name":"no-namespace"}', undefined],
    ['something else', undefined],
  ])('finds the taint eviction in %s', (message, pod) => expect(taintEvictedPod(message)).toBe(pod));
});
