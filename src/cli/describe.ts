import { EXIT, KrError, quote } from '../core/errors.js';
import { didYouMean } from '../document/did-you-mean.js';
import { defaultRegistry as registry } from '../engine/registry.js';
import { actionText, probeText } from './describe-text.js';
import { type DataFormat, formatData, isData, outputOption } from './formats.js';
import { out } from './output.js';
import { actionExample, actionSection, exampleYaml, nodesRow, paramRows, probeExample, probeSection } from './reference.js';
import { terminalWidth } from './wrap.js';
import type { CommandHelp, Register } from './types.js';

/** What `describe -o json|yaml` prints for one module: the fields of docs/actions.md and docs/probes.md. */
export async function describeData(id: string): Promise<unknown[]> {
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
      example: exampleYaml(actionExample(m)),
      layouts: m.layouts ?? {},
      undo: m.undo,
      access: m.access,
    });
  }
  if (registry.ids('probe').includes(id)) {
    const m = (await registry.probe(id)).meta;
    found.push({
      id,
      type: 'probe',
      summary: m.summary,
      description: m.description,
      params: paramRows(m.params),
      example: exampleYaml(probeExample(m)),
      access: m.access,
      nodeFacts: m.nodeFacts?.kinds ?? [],
    });
  }
  return found;
}

/** The Markdown of docs/actions.md and docs/probes.md (`-o markdown`), or the same as plain text wrapped at WIDTH. */
async function describeText(id: string, format: 'text' | 'markdown', width: number): Promise<string[]> {
  const found: string[] = [];
  if (registry.ids('action').includes(id)) {
    const m = (await registry.action(id)).meta;
    found.push(format === 'text' ? actionText(m, width) : `# action ${actionSection(m).slice(3)}`);
  }
  if (registry.ids('probe').includes(id)) {
    const m = (await registry.probe(id)).meta;
    found.push(format === 'text' ? probeText(m, width) : `# probe ${probeSection(m).slice(3)}`);
  }
  return found;
}

/**
 * `describe ID [-o text|markdown|json|yaml]`: an action's or a probe's parameters, an example `with:`, layouts, undo
 * and API permissions; plain text on a terminal, Markdown into a pipe.
 */
export const register: Register = (program, done) => {
  program
    .command('describe')
    .description('show an action or a probe: its parameters (types, defaults), layouts, how it is undone, API permissions')
    .argument('<id>', 'an action or probe id (see `actions` and `probes`)')
    .addOption(outputOption(['markdown'], 'output format (default: text on a terminal, markdown into a pipe or file)'))
    .action(async (id: string, o: { output?: 'text' | 'markdown' | DataFormat }) => {
      const format = o.output ?? (process.stdout.isTTY ? 'text' : 'markdown');
      const found = isData(format) ? await describeData(id) : await describeText(id, format, terminalWidth());
      if (!found.length) {
        const hint = didYouMean(id, [...registry.ids('action'), ...registry.ids('probe')]);
        throw new KrError('UNKNOWN_MODULE', `no action or probe is called ${quote(id)}${hint ? `: ${hint}` : ''}`, {
          exit: EXIT.invalid,
          details: ['list them with `kube-runbook actions` and `kube-runbook probes`'],
        });
      }
      out.stdout(isData(format) ? formatData(format, found.length === 1 ? found[0] : found) : found.join('\n\n'));
      done(EXIT.ok);
    });
};

/** Where `--help` lists it, and its examples. */
export const help: CommandHelp = {
  group: 'Inspect',
  examples: [
    ['describe stop-kubelet', "an action's parameters, an example with: block, layouts, undo, API permissions"],
    ['describe node-leases -o markdown', 'a probe, as docs/probes.md shows it'],
    ['describe stop-kubelet -o json', 'the same as JSON (or -o yaml)'],
  ],
};
