import { access, mkdir, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { createInterface } from 'node:readline/promises';
import { Option } from 'commander';
import { EXIT, KrError, quote } from '../core/errors.js';
import { labStateDir } from '../inventory/lab-home.js';
import { DEFAULT_CONTEXT, LAYOUTS, type Starter, type StarterLayout, starterInventory, starterRunbook } from './init-files.js';
import { out } from './output.js';
import type { CommandHelp, Register } from './types.js';

const FILES = ['runbook.yaml', 'inventory.yaml'] as const;

interface InitFlags {
  layout?: StarterLayout;
  nodes?: string;
  context?: string;
  dir: string;
  force?: boolean;
}

/** Asks QUESTION, with DEFAULT taken on an empty answer. */
type Ask = (question: string, fallback: string) => Promise<string>;

function terminalAsk(): { ask: Ask; close: () => void } {
  const rl = createInterface({ input: process.stdin, output: process.stderr });
  return {
    ask: async (question, fallback) => (await rl.question(`${question} [${fallback}]: `)).trim() || fallback,
    close: () => rl.close(),
  };
}

function nodeCount(text: string): number {
  const n = Number(text);
  if (!/^\d+$/.test(text.trim()) || n < 1 || n > 500)
    throw new KrError('INIT_BAD_NODES', `--nodes: expected a number of worker nodes from 1 to 500 (got ${quote(text)})`, {
      exit: EXIT.invalid,
    });
  return n;
}

function layoutOf(text: string): StarterLayout {
  if (!(LAYOUTS as readonly string[]).includes(text))
    throw new KrError('INIT_BAD_LAYOUT', `layout: expected one of ${LAYOUTS.join(', ')} (got ${quote(text)})`, { exit: EXIT.invalid });
  return text as StarterLayout;
}

/** The starter's settings: the flags, else answers on a terminal, else the defaults. */
async function settings(flags: InitFlags, ask: Ask | undefined): Promise<Starter> {
  const layout = flags.layout ?? (ask ? layoutOf(await ask(`layout (${LAYOUTS.join(', ')})`, 'kubeadm')) : 'kubeadm');
  const nodes = nodeCount(flags.nodes ?? (ask ? await ask('worker nodes', '2') : '2'));
  const context =
    flags.context ?? (ask ? await ask('kubeconfig context the runbook may run against', DEFAULT_CONTEXT[layout]) : DEFAULT_CONTEXT[layout]);
  return { layout, nodes, context, labStateDir: labStateDir('lab') };
}

/** `init [--layout L] [--nodes N] [--context C] [--dir D] [--force]`: a starter runbook and inventory. */
export const register: Register = (program, done) => {
  program
    .command('init')
    .description('write a starter runbook.yaml and inventory.yaml (asks on a terminal what the flags do not say)')
    .addOption(new Option('--layout <layout>', 'how the cluster runs; agent: managed nodes reached through the API').choices(LAYOUTS))
    .option('--nodes <n>', 'worker nodes in the inventory (default: 2)')
    .option('--context <name>', 'the kubeconfig context the runbook may run against')
    .addOption(new Option('--dir <dir>', 'where to write the two files').default('.'))
    .option('--force', 'overwrite files that exist')
    .action(async (flags: InitFlags) => {
      if (flags.nodes !== undefined) nodeCount(flags.nodes);
      if (flags.context !== undefined && flags.context.trim() === '')
        throw new KrError('INIT_BAD_CONTEXT', '--context: expected a context name (got "")', { exit: EXIT.invalid });
      const paths = FILES.map((f) => join(flags.dir, f));
      if (!flags.force)
        for (const path of paths)
          if (
            await access(path).then(
              () => true,
              () => false,
            )
          )
            throw new KrError('INIT_EXISTS', `${path} exists: nothing was written (--force overwrites)`, { exit: EXIT.invalid });
      const terminal = process.stdin.isTTY ? terminalAsk() : undefined;
      const starter = await settings(flags, terminal?.ask).finally(() => terminal?.close());
      await mkdir(flags.dir, { recursive: true });
      await writeFile(paths[0]!, starterRunbook(starter));
      await writeFile(paths[1]!, starterInventory(starter));
      out.stdout(
        `wrote ${paths.join(' and ')} (layout ${starter.layout}, ${starter.nodes} worker node${starter.nodes === 1 ? '' : 's'}, context ${starter.context})`,
      );
      out.stdout(`next: put your nodes in ${paths[1]}, then kube-runbook plan ${paths[0]} -i ${paths[1]}`);
      done(EXIT.ok);
    });
};

/** Where `--help` lists it, and its examples. */
export const help: CommandHelp = {
  group: 'Author',
  examples: [
    ['init', 'write runbook.yaml and inventory.yaml, asking what the flags do not say'],
    ['init --layout kubeadm --nodes 3 --context staging', 'the same without questions'],
  ],
};
