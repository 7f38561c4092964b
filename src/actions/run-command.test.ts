import assert from 'node:assert/strict';
import type { InventoryInput } from '../inventory/schema.js';
import { actionTester } from '../testing/action-tester.js';
import action from './run-command.js';
import { inventoryOf } from '../testing/inventories.js';
import { failingOn } from '../testing/fake-nodes.js';

const inventory: InventoryInput = inventoryOf({
  layout: 'lab',
  lab: { stateDir: '/nonexistent' },
  nodes: [{ name: 'node-1' }, { name: 'node-2' }],
});

const params = { apply: 'touch /tmp/kr-flag', revert: 'rm -f /tmp/kr-flag', check: 'command -v touch' };

actionTester(action, {
  inventory,
  valid: [
    {
      name: 'runs check, apply, then revert twice, on the target node only, with the timeout',
      node: 'node-2',
      params: { ...params, timeout: '5s' },
      check(r) {
        assert.deepEqual(
          r.scripts.map((s) => [s.phase, s.node, s.script]),
          [
            ['preflight', 'node-2', 'command -v touch'],
            ['apply', 'node-2', 'touch /tmp/kr-flag'],
            ['revert', 'node-2', 'rm -f /tmp/kr-flag'],
            ['revert-again', 'node-2', 'rm -f /tmp/kr-flag'],
          ],
        );
        assert.ok(r.scripts.every((s) => s.options.timeoutMs === 5000));
        assert.equal(r.nodeSideRevert, 'rm -f /tmp/kr-flag', 'the dead-man runs the revert script');
      },
    },
    {
      name: 'no check: no preflight script',
      params: { apply: 'true', revert: 'true' },
      check(r) {
        assert.deepEqual(
          r.scripts.map((s) => s.phase),
          ['apply', 'revert', 'revert-again'],
        );
        assert.equal(r.prepared.timeoutMs, 60_000);
      },
    },
  ],
  invalid: [
    { name: 'no revert', params: { apply: 'true' }, phase: 'params', code: 'INVALID_PARAMS' },
    { name: 'an empty apply', params: { apply: '', revert: 'true' }, phase: 'params' },
    {
      name: 'a failing check refuses the run',
      params,
      handler: failingOn((script) => script === params.check, 'touch: not found'),
      phase: 'preflight',
      code: 'PREFLIGHT_CHECK_FAILED',
      message: /touch: not found/,
    },
    {
      name: 'a failing apply',
      params,
      handler: failingOn((script) => script === params.apply, 'read-only file system', { code: 2 }),
      phase: 'apply',
      code: 'COMMAND_FAILED',
    },
  ],
});
