import { access, mkdir, readdir, readFile, writeFile } from 'node:fs/promises';
import { dirname, join, resolve } from 'node:path';
import { Option } from 'commander';
import { parse } from 'yaml';
import { type Clock, realClock } from '../core/clock.js';
import { EXIT, KrError, messageOf, quote } from '../core/errors.js';
import { silentLogger } from '../core/logger.js';
import { redactText } from '../core/redact.js';
import { createKubeAccess } from '../kube/client.js';
import { kubeconfigContextList, loadClientConfig } from '../kube/kubeconfig.js';
import type { KubeAccess } from '../kube/types.js';
import { labStateDir } from '../inventory/lab-home.js';
import { type Discovered, discoverCluster } from './init-discover.js';
import { LAYOUTS, type Starter, type StarterLayout, type StarterNode, starterInventory, starterRunbook } from './init-files.js';
import { out } from './output.js';
import { type Prompter, terminalPrompter } from './prompt.js';
import type { CommandHelp, Register } from './types.js';

const FILES = ['runbook.yaml', 'inventory.yaml'] as const;

export interface InitFlags {
  layout?: StarterLayout;
  nodes?: string;
  context?: string;
  kubeconfig?: string;
  dir: string;
  force?: boolean;
  /** Ask nothing, even on a terminal: what is not found is left as a TODO. */
  yes?: boolean;
}

/** A lab of this machine whose apiserver is the context's: its own inventory's spec, as written. */
export interface FoundLab {
  instance: string;
  stateDir: string;
  spec: Record<string, unknown>;
}

/** Everything `init` touches besides the two files it writes; tests give fakes. */
export interface InitDeps {
  env: NodeJS.ProcessEnv;
  clock: Clock;
  /** Questions on a terminal; absent when there is none (or --yes). */
  prompter?: Prompter;
  /** The kubeconfig's contexts and current-context, as kubectl would read it (src/kube/kubeconfig.ts). */
  contexts(file: string | undefined, env: NodeJS.ProcessEnv, origin?: string): { names: string[]; current?: string } | undefined;
  connect(o: { kubeconfig?: string; origin?: string; context: string; clock: Clock }): KubeAccess;
  discover(kube: KubeAccess): Promise<Discovered>;
  /** A lab of this machine serving SERVER, if any. */
  findLab(server: string): Promise<FoundLab | undefined>;
}

function nodeCount(text: string): number {
  const n = Number(text);
  if (!/^\d+$/.test(text.trim()) || n < 1 || n > 500)
    throw new KrError('INIT_BAD_NODES', `--nodes: expected a number of worker nodes from 1 to 500 (got ${quote(text)})`, {
      exit: EXIT.invalid,
    });
  return n;
}

const NODE_NAME = /^[a-z0-9]([-a-z0-9.]{0,251}[a-z0-9])?$/;

/** Node names separated by commas or spaces; empty: none. */
function nodeNames(answer: string): string[] | Error {
  const names = answer.split(/[\s,]+/).filter(Boolean);
  const bad = names.find((n) => !NODE_NAME.test(n));
  return bad ? new Error(`expected Node names (lowercase letters, digits, "-" and "."), separated by commas (got ${quote(bad)})`) : names;
}

/** The context: --context (which must be in the kubeconfig), else chosen on a terminal, else the current one. */
async function pickContext(
  flags: InitFlags,
  list: { names: string[]; current?: string } | undefined,
  ask: Prompter | undefined,
): Promise<string | undefined> {
  if (flags.context !== undefined) {
    if (list && !list.names.includes(flags.context))
      throw new KrError(
        'KUBE_CONTEXT_UNKNOWN',
        `--context: no context ${quote(flags.context)} in the kubeconfig (known: ${list.names.join(', ') || 'none'})`,
        { exit: EXIT.invalid },
      );
    return flags.context;
  }
  const current = list?.current && list.names.includes(list.current) ? list.current : undefined;
  if (!ask) return current;
  if (!list?.names.length) {
    const a = await ask.ask('kubeconfig context the runbook may run against (empty: leave a TODO)', { parse: (x) => x });
    return a || undefined;
  }
  ask.say('kubeconfig contexts:');
  list.names.forEach((n, i) => ask.say(`  ${i + 1}) ${n}${n === current ? ' (current)' : ''}`));
  return ask.ask('context the runbook may run against (number or name)', {
    fallback: current,
    parse: (a) => {
      const byNumber = /^\d+$/.test(a) ? list.names[Number(a) - 1] : undefined;
      const name = byNumber ?? (list.names.includes(a) ? a : undefined);
      return name ?? new Error(`expected a number from 1 to ${list.names.length} or one of ${list.names.join(', ')} (got ${quote(a)})`);
    },
  });
}

const str = (v: unknown) => (typeof v === 'string' ? v : undefined);

/** A lab node's own `kubelet`, when it says one the inventory knows. */
const kubeletOf = (v: unknown): 'systemd' | 'lab' | undefined => (v === 'systemd' || v === 'lab' ? v : undefined);

/** A lab node's own transport, its scalar fields as they are (the inventory's schema checks them when it is read). */
function transportOf(v: unknown): Record<string, string | number | boolean> | undefined {
  if (!v || typeof v !== 'object' || Array.isArray(v)) return undefined;
  return Object.fromEntries(
    Object.entries(v).filter((e): e is [string, string | number | boolean] => ['string', 'number', 'boolean'].includes(typeof e[1])),
  );
}

/** The starter's nodes and settings from a lab's own inventory. */
function fromLab(lab: FoundLab): Partial<Starter> & { layout: StarterLayout } {
  const s = lab.spec;
  const nodes = (Array.isArray(s.nodes) ? s.nodes : []).map((n: Record<string, unknown>) => ({
    name: String(n.name),
    address: str(n.address),
    roles: Array.isArray(n.roles) ? n.roles.map(String) : ['worker'],
    zone: str(n.zone),
    netns: str(n.netns),
    mountns: str(n.mountns),
    transport: transportOf(n.transport),
    kubelet: kubeletOf(n.kubelet),
  }));
  const labSpec = Object.fromEntries(['kubeadm', 'apiserver', 'prometheus'].filter((k) => s[k] !== undefined).map((k) => [k, s[k]]));
  const controller = Object.fromEntries(
    Object.entries((s.controller ?? {}) as Record<string, unknown>).filter(
      (e): e is [string, string | number] => typeof e[1] === 'string' || typeof e[1] === 'number',
    ),
  );
  return {
    layout: s.layout === 'kubeadm' ? 'kubeadm' : 'lab',
    found: nodes,
    netns: true,
    labStateDir: lab.stateDir,
    labSpec,
    controller,
    notes: [`the nodes and settings of lab ${lab.instance} of this machine, whose apiserver this context reaches`],
  };
}

/** Asks what discovery did not find: the layout, then the nodes (empty answers leave TODOs). */
async function askRest(ask: Prompter, s: Starter): Promise<void> {
  s.layout ??= await ask.ask(`layout (${LAYOUTS.join(', ')})`, {
    fallback: 'kubeadm',
    parse: (a) =>
      (LAYOUTS as readonly string[]).includes(a)
        ? (a as StarterLayout)
        : new Error(`expected one of ${LAYOUTS.join(', ')} (got ${quote(a)})`),
  });
  if (s.found || s.layout === 'lab') return;
  const cps =
    s.layout === 'agent' ? [] : await ask.ask('control-plane Node names, comma-separated (empty: leave a TODO)', { parse: nodeNames });
  const workers = await ask.ask('worker Node names, comma-separated (empty: leave TODOs)', { parse: nodeNames });
  if (!cps.length && !workers.length) return;
  s.found = [
    ...cps.map((name): StarterNode => ({ name, roles: ['control-plane', 'etcd'] })),
    ...workers.map((name): StarterNode => ({ name, roles: ['worker'] })),
  ];
  s.notes = [...(s.notes ?? []), 'nodes as given; each is reached at its name unless you add an address'];
}

/** The starter's settings: the flags, what the cluster says of itself, answers on a terminal, and TODOs for the rest. */
export async function initSettings(flags: InitFlags, deps: InitDeps): Promise<Starter> {
  const ask = deps.prompter;
  const kubeconfig = flags.kubeconfig ? resolve(flags.kubeconfig) : undefined;
  const list = deps.contexts(kubeconfig, deps.env, kubeconfig ? '--kubeconfig' : undefined);
  const context = await pickContext(flags, list, ask);
  const s: Starter = { layout: flags.layout, nodes: nodeCount(flags.nodes ?? '2'), context, kubeconfig, labStateDir: labStateDir('lab') };
  const notes: string[] = [];
  if (!list) notes.push('no kubeconfig was found: nothing could be read from a cluster');
  else if (context === undefined) notes.push('the kubeconfig has no current-context: give --context');
  else {
    let kube: KubeAccess | undefined;
    try {
      kube = deps.connect({ kubeconfig, origin: kubeconfig ? '--kubeconfig' : undefined, context, clock: deps.clock });
      const lab = await deps.findLab(kube.server);
      if (lab) {
        const l = fromLab(lab);
        Object.assign(s, { ...l, layout: flags.layout ?? l.layout });
        notes.push(...(l.notes ?? []));
        // nodes joined to the lab's cluster by other means (`kubeadm join` on a machine of their own): not its
        // network namespaces, so each is written with a transport of its own
        const listed = await deps.discover(kube).then(
          (d) => d.nodes ?? [],
          () => [],
        );
        const others = listed.filter((n) => !l.found?.some((f) => f.name === n.name));
        if (others.length) {
          s.found = [...(l.found ?? []), ...others.map((n) => ({ ...n, ssh: true }))];
          notes.push(`${others.map((n) => n.name).join(', ')}: in the cluster but not made by lab ${lab.instance}; reached over ssh`);
        }
      } else {
        const d = await deps.discover(kube);
        s.layout ??= d.layout;
        s.found = d.nodes;
        s.controller = d.controller;
        notes.push(
          `found on context ${context}: ${[
            d.layoutFrom ? `layout ${d.layout} (${d.layoutFrom})` : '',
            d.nodes ? `${d.nodes.length} nodes` : '',
            d.controller ? "the controller-manager's settings" : '',
          ]
            .filter(Boolean)
            .join(', ')}`,
          ...d.notes,
        );
      }
    } catch (e) {
      if (e instanceof KrError && e.exit === EXIT.invalid) throw e;
      notes.push(`context ${context}${kube ? ` (${kube.server})` : ''} could not be read: ${messageOf(e)}`);
    } finally {
      kube?.close?.();
    }
  }
  // printed and written in the inventory: through the one redaction point, as every sink
  s.notes = notes.map((n) => redactText(n));
  if (ask) await askRest(ask, s);
  return s;
}

const TODO_LINE = /"TODO: /g;

/** Writes the two files (nothing when one exists, unless --force) and says what to do next. */
export async function runInit(flags: InitFlags, deps: InitDeps): Promise<{ files: string[]; todos: number; starter: Starter }> {
  if (flags.nodes !== undefined) nodeCount(flags.nodes);
  if (flags.context !== undefined && flags.context.trim() === '')
    throw new KrError('INIT_BAD_CONTEXT', '--context: expected a context name (got "")', { exit: EXIT.invalid });
  const files = FILES.map((f) => join(flags.dir, f));
  if (!flags.force)
    for (const path of files)
      if (
        await access(path).then(
          () => true,
          () => false,
        )
      )
        throw new KrError('INIT_EXISTS', `${path} exists: nothing was written (--force overwrites)`, { exit: EXIT.invalid });
  const starter = await initSettings(flags, deps);
  const texts = [starterRunbook(starter), starterInventory(starter)];
  await mkdir(flags.dir, { recursive: true });
  await writeFile(files[0]!, texts[0]!);
  await writeFile(files[1]!, texts[1]!);
  return { files, todos: texts.join('').match(TODO_LINE)?.length ?? 0, starter };
}

/**
 * A lab of this machine whose apiserver is SERVER: each instance under the lab's home, by the inventory `lab up`
 * wrote in its state directory and the apiserver of that inventory's kubeconfig and context (product formats only:
 * the lab's own code is not part of this package).
 */
async function findLab(server: string): Promise<FoundLab | undefined> {
  const home = dirname(labStateDir('lab'));
  const instances = await readdir(home).catch(() => [] as string[]);
  for (const instance of instances.filter((i) => /^[a-z0-9]{1,6}$/.test(i))) {
    try {
      const stateDir = labStateDir(instance);
      const file = join(stateDir, 'inventory.yaml');
      const spec = (parse(await readFile(file, 'utf8')) as { spec?: Record<string, unknown> }).spec;
      if (typeof spec?.kubeconfig !== 'string' || typeof spec.context !== 'string') continue;
      const labServer = loadClientConfig({ file: resolve(stateDir, spec.kubeconfig), context: spec.context }).server;
      if (new URL(labServer).origin === new URL(server).origin) return { instance, stateDir, spec };
    } catch {
      /* not a lab that is up */
    }
  }
  return undefined;
}

export function defaultInitDeps(prompter: Prompter | undefined): InitDeps {
  return {
    env: process.env,
    clock: realClock,
    prompter,
    contexts: kubeconfigContextList,
    connect: (o) =>
      createKubeAccess({ kubeconfig: o.kubeconfig, kubeconfigOrigin: o.origin, context: o.context, clock: o.clock, log: silentLogger }),
    discover: discoverCluster,
    findLab,
  };
}

const plural = (n: number, word: string) => `${n} ${word}${n === 1 ? '' : 's'}`;

/** `init [--context C] [--kubeconfig F] [--layout L] [--nodes N] [--dir D] [--force] [--yes]`: a starter runbook and inventory. */
export const register: Register = (program, done) => {
  program
    .command('init')
    .description(
      "write a starter runbook.yaml and inventory.yaml for the kubeconfig's current context (or --context): what the cluster says of itself, asked on a terminal, else left as TODOs",
    )
    .option('--context <name>', 'the kubeconfig context the runbook may run against (default: the current one; a terminal offers the list)')
    .option('--kubeconfig <file>', 'the kubeconfig (default: $KUBECONFIG, else ~/.kube/config); written in the inventory')
    .addOption(
      new Option(
        '--layout <layout>',
        'how the cluster runs (default: found on the cluster); agent: managed nodes reached through the API',
      ).choices(LAYOUTS),
    )
    .option('--nodes <n>', 'worker nodes written as TODOs when the cluster cannot list them (default: 2)')
    .addOption(new Option('--dir <dir>', 'where to write the two files').default('.'))
    .option('--force', 'overwrite files that exist')
    .option('-y, --yes', 'ask nothing, even on a terminal: what is not found is left as a TODO')
    .action(async (flags: InitFlags) => {
      const prompter = process.stdin.isTTY && !flags.yes ? terminalPrompter(process.stdin, process.stderr) : undefined;
      const r = await runInit(flags, defaultInitDeps(prompter)).finally(() => prompter?.close());
      const s = r.starter;
      const workers = s.found ? s.found.filter((n) => n.roles.includes('worker')).length : s.nodes;
      out.stdout(
        `wrote ${r.files.join(' and ')} (layout ${s.layout ?? 'TODO'}, ${plural(workers, 'worker node')}, context ${s.context ?? 'TODO'})`,
      );
      for (const n of s.notes ?? []) out.stdout(`  ${n}`);
      out.stdout(
        r.todos
          ? `next: fill in ${plural(r.todos, 'TODO')} (kube-runbook validate ${flags.dir} names each), then kube-runbook plan ${r.files[0]} -i ${r.files[1]}`
          : `next: kube-runbook plan ${r.files[0]} -i ${r.files[1]}`,
      );
      done(EXIT.ok);
    });
};

/** Where `--help` lists it, and its examples. */
export const help: CommandHelp = {
  group: 'Author',
  examples: [
    ['init', "runbook.yaml and inventory.yaml for the current context's cluster, asking what it cannot find"],
    ['init --context staging --yes', 'the same for context staging, TODOs (which validate names) for what it cannot find'],
  ],
};
