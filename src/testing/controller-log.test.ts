import { describe, expect, it } from 'vitest';
import { parseControllerLog } from './controller-log.js';

const at = (hms: string) => Date.parse(`2026-12-02T${hms}Z`);

describe('the controller log', () => {
  it("reads 1.20's lines and 1.34's and 1.37's structured lines, failed taint writes among them, and nothing else", () => {
    const text = [
      // 1.20: format strings
      'I1202 08:01:02.123456   41234 node_lifecycle_controller.go:884] Node node-3 is unresponsive as of 2026-12-02 08:01:02.1 +0000 UTC m=+9.9. Adding it to the Taint queue.',
      'I1202 08:01:03.000001   41234 node_lifecycle_controller.go:1245] Controller detected that zone region1:\x00:zone-a is now in state PartialDisruption.',
      'I1202 08:01:09.500000   41234 taint_manager.go:106] NoExecuteTaintManager is deleting Pod: default/web-7',
      'I1202 08:01:10.000000   41234 node_lifecycle_controller.go:1195] Controller detected that all Nodes are not-Ready. Entering master disruption mode.',
      'E1202 08:01:10.500000   41234 runtime.go:79] unable to taint [&Taint{Key:node.kubernetes.io/unreachable,Value:,Effect:NoExecute,TimeAdded:2026-12-02 08:01:05 +0000 UTC,}] unresponsive Node "node-3": the server was unable to return a response in the time allotted',
      'I1202 08:01:11.000000   41234 other.go:1] something else',
      'not a klog line',
      // 1.34 and 1.37: structured lines
      'I1202 08:02:02.123456   41234 node_lifecycle_controller.go:818] "Node is unresponsive. Adding it to the Taint queue" logger="node-lifecycle-controller" node="node-4" timeStamp="2026-12-02 08:02:02.1 +0000 UTC m=+9.9"',
      'I1202 08:02:03.000001   41234 node_lifecycle_controller.go:1133] "Controller detected that zone is now in new state" logger="node-lifecycle-controller" zone="region1:\\x00:zone-b" newState="FullDisruption"',
      'I1202 08:02:09.500000   41234 taint_eviction.go:111] "Deleting pod" logger="taint-eviction-controller" controller="taint-eviction-controller" pod="default/web-8"',
      'I1202 08:02:09.600000   41234 taint_eviction.go:111] "Deleting pod" logger="taint-eviction-controller" controller="taint-eviction-controller" pod="default/web-9:0b5e3c1d-0000-4000-8000-000000000009"',
      'E1202 08:02:10.000000   41234 controller_utils.go:160] "Unhandled Error" err="unable to remove [&Taint{Key:node.kubernetes.io/not-ready,Value:,Effect:NoExecute,TimeAdded:<nil>,}] unneeded taint from unresponsive Node \\"node-4\\": Timeout: request did not complete within requested timeout" logger="UnhandledError"',
      // the same words at another severity are not a failure
      'I1202 08:02:11.000000   41234 other.go:1] unable to taint [] unresponsive Node "node-5": quoted in an info line',
    ].join('\n');
    expect(parseControllerLog(text, 2026)).toEqual([
      { at: at('08:01:02.123'), queued: 'node-3' },
      { at: at('08:01:03.000'), zone: { zone: 'region1::zone-a', state: 'PartialDisruption' } },
      { at: at('08:01:09.500'), pod: 'default/web-7' },
      { at: at('08:01:10.000'), zone: { zone: '*', state: 'MasterDisruption' } },
      { at: at('08:01:10.500'), taintFailed: 'node-3' },
      { at: at('08:02:02.123'), queued: 'node-4' },
      { at: at('08:02:03.000'), zone: { zone: 'region1::zone-b', state: 'FullDisruption' } },
      { at: at('08:02:09.500'), pod: 'default/web-8' },
      { at: at('08:02:09.600'), pod: 'default/web-9' },
      { at: at('08:02:10.000'), taintFailed: 'node-4' },
    ]);
  });
});
