import { Option } from 'commander';
import { EXIT, KrError, quote } from '../core/errors.js';
import { didYouMean } from '../document/did-you-mean.js';
import { defaultRegistry as registry } from '../engine/registry.js';
import { out } from './output.js';
import { actionSection, nodesRow, paramRows, probeSection } from './reference.js';
import type { Register } from './types.js';

/** What `describe --output json` prints for one module: the fields of docs/actions.md and docs/probes.md. */
async function describeJson(id: string): Promise<unknown[]> {
  const found: unknown[] = [];
  if (registry.ids('action').includes(id)) {
    const m = (await registry.action(id)).meta;
    found.push({
      id,
      type: 'action',
      kind: m.kind,
      targets: m.targets,
      summary: m.summary,
      description: m.description,
      params: [...nodesRow(m), ...paramRows(m.params)],
      layouts: m.layouts ?? {},
      undo: m.undo,
      access: m.access,
    });
  }
  if (registry.ids('probe').includes(id)) {
    const m = (await registry.probe(id)).meta;
    found.push({ id, type: 'probe', summary: m.summary, description: m.description, params: paramRows(m.params), access: m.access });
  }
  return found;
}

async function describeText(id: string): Promise<string[]> {
  const found: string[] = [];
  if (registry.ids('action').includes(id)) found.push(`# action ${actionSection((await registry.action(id)).meta).slice(3)}`);
  if (registry.ids('probe').includes(id)) found.push(`# probe ${probeSection((await registry.probe(id)).meta).slice(3)}`);
  return found;
}

/** `describe ID [-o json]`: an action's or a probe's parameters, layouts, undo and API permissions. */
export const register: Register = (program, done) => {
  program
    .command('describe')
    .description('show an action or a probe: its parameters (types, defaults), layouts, how it is undone, API permissions')
    .argument('<id>', 'an action or probe id (see `actions` and `probes`)')
    .addOption(new Option('-o, --output <format>', 'output format').choices(['text', 'json']).default('text'))
    .action(async (id: string, o: { output: string }) => {
      const found = o.output === 'json' ? await describeJson(id) : await describeText(id);
      if (!found.length) {
        const hint = didYouMean(id, [...registry.ids('action'), ...registry.ids('probe')]);
        throw new KrError('UNKNOWN_MODULE', `no action or probe is called ${quote(id)}${hint ? `: ${hint}` : ''}`, {
          exit: EXIT.invalid,
          details: ['list them with `kube-runbook actions` and `kube-runbook probes`'],
        });
      }
      out.stdout(o.output === 'json' ? JSON.stringify(found.length === 1 ? found[0] : found, null, 2) : found.join('\n\n'));
      done(EXIT.ok);
    });
};
