import { basename } from 'node:path';
import { Command, CommanderError } from 'commander';
import { EXIT, type ExitCode, isKrError, messageOf } from '../core/errors.js';
import { tuneHeap } from '../core/heap.js';
import { redactText } from '../core/redact.js';
import { toolVersion } from '../core/version.js';
import { npmOnly } from './npm-only.js';
import { dropOutputOnClosedPipes, out } from './output.js';
import type { Register } from './types.js';

/**
 * Set (to true) by the single-executable build (scripts/sea.mjs), whose bundler then leaves the lab and the demo out:
 * the test of it stays inline in their entries below, with the import() right in the other branch, where the bundler
 * sees that branch is dead (not inside a function of it).
 */
declare const __KUBE_RUNBOOK_SINGLE_EXECUTABLE__: boolean | undefined;

type Load = () => Promise<{ register: Register }>;

/** Command modules, sorted; each adds one subcommand. */
const commands: Record<string, Load> = {
  actions: () => import('./actions.js'),
  agent: () => import('./agent.js'),
  audit: () => import('./audit.js'),
  completion: () => import('./completion.js'),
  demo: () =>
    typeof __KUBE_RUNBOOK_SINGLE_EXECUTABLE__ === 'boolean'
      ? Promise.resolve(npmOnly('demo'))
      : import('./demo.js').then(({ register }) => ({ register })),
  describe: () => import('./describe.js'),
  docs: () => import('./docs.js'),
  'exit-watch': () => import('./exit-watch.js'),
  init: () => import('./init.js'),
  lab: () =>
    typeof __KUBE_RUNBOOK_SINGLE_EXECUTABLE__ === 'boolean'
      ? Promise.resolve(npmOnly('lab'))
      : import('./lab.js').then(({ register }) => ({ register })),
  manifests: () => import('./manifests.js'),
  plan: () => import('./plan.js'),
  probes: () => import('./probes.js'),
  recover: () => import('./recover.js'),
  report: () => import('./report.js'),
  run: () => import('./run.js'),
  schema: () => import('./schema.js'),
  validate: () => import('./validate.js'),
  version: () => import('./version.js'),
};

/** Runs the CLI and sets process.exitCode: the only place in the project that does. */
export async function main(argv: string[]): Promise<void> {
  tuneHeap();
  dropOutputOnClosedPipes();
  const code = await runCli(argv);
  process.exitCode = code;
  if (exitNow) process.exit(code);
}

let exitNow = false;

export async function runCli(argv: string[]): Promise<ExitCode> {
  let code: ExitCode = EXIT.ok;
  const invokedAs = basename(argv[1] ?? 'kube-runbook').replace(/\.js$/, '');
  const program = new Command(invokedAs === 'kubectl-runbook' ? 'kubectl runbook' : 'kube-runbook')
    .description('Chaos-engineering runbooks for real Kubernetes clusters: faults, guards that stop eviction cascades, rollback always.')
    .version(toolVersion(), '-V, --version')
    .showHelpAfterError()
    .exitOverride()
    .configureOutput({ writeOut: (s) => out.stdout(s), writeErr: (s) => out.stderr(s) });
  for (const load of Object.values(commands))
    (await load()).register(program, (c, o) => {
      code = c;
      exitNow ||= o?.now === true;
    });
  for (const cmd of program.commands) cmd.exitOverride();
  try {
    await program.parseAsync(argv);
    return code;
  } catch (e) {
    if (e instanceof CommanderError) {
      if (e.exitCode === 0 || e.code === 'commander.helpDisplayed' || e.code === 'commander.version') return EXIT.ok;
      return EXIT.invalid;
    }
    if (isKrError(e)) {
      out.stderr(`kube-runbook: ${redactText(e.message)}${e.code ? ` [${e.code}]` : ''}`);
      for (const d of e.details) out.stderr(redactText(d));
      return e.exit;
    }
    out.stderr(`kube-runbook: unexpected error: ${redactText(messageOf(e))}`);
    if (process.env.KUBE_RUNBOOK_DEBUG && e instanceof Error && e.stack) out.stderr(redactText(e.stack));
    return EXIT.failed;
  }
}
