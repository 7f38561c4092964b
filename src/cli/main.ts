import { basename } from 'node:path';
import { Command } from 'commander';
import { EXIT, type ExitCode } from '../core/errors.js';
import { tuneHeap } from '../core/heap.js';
import { toolVersion } from '../core/version.js';
import { commandPath, examplesText, usageLine } from './help.js';
import { dropOutputOnClosedPipes, out } from './output.js';
import { exitCodeOfThrown } from './thrown.js';
import { type CommandHelp, GROUPS, type Register } from './types.js';

type Load = () => Promise<{ register: Register; help: CommandHelp }>;

/** Command modules, sorted; each adds one subcommand, and says under which heading of the help and with which examples. */
const commands: Record<string, Load> = {
  actions: () => import('./actions.js'),
  agent: () => import('./agent.js'),
  audit: () => import('./audit.js'),
  completion: () => import('./completion.js'),
  describe: () => import('./describe.js'),
  docs: () => import('./docs.js'),
  'exit-watch': () => import('./exit-watch.js'),
  halt: () => import('./halt.js'),
  init: () => import('./init.js'),
  manifests: () => import('./manifests.js'),
  mcp: () => import('./mcp.js'),
  plan: () => import('./plan.js'),
  probes: () => import('./probes.js'),
  recover: () => import('./recover.js'),
  report: () => import('./report.js'),
  resume: () => import('./resume.js'),
  run: () => import('./run.js'),
  schema: () => import('./schema.js'),
  status: () => import('./status.js'),
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

/** A usage error is one line and where to read more, not the whole help: each command names its own `--help`. */
function hintOnUsageErrors(cmd: Command): void {
  cmd.exitOverride().showHelpAfterError(`Run '${commandPath(cmd)} --help' for usage.`);
  for (const sub of cmd.commands) hintOnUsageErrors(sub);
}

export async function runCli(argv: string[]): Promise<ExitCode> {
  let code: ExitCode = EXIT.ok;
  const invokedAs = basename(argv[1] ?? 'kube-runbook').replace(/\.js$/, '');
  const program = new Command(invokedAs === 'kubectl-runbook' ? 'kubectl runbook' : 'kube-runbook')
    .description('Chaos-engineering runbooks for real Kubernetes clusters: faults, guards that stop eviction cascades, rollback always.')
    .version(toolVersion(), '-V, --version')
    .exitOverride()
    .configureOutput({
      writeOut: (s) => out.stdout(s),
      writeErr: (s) => out.stderr(s),
      outputError: (s, write) => write(usageLine(s)),
    });
  const modules = await Promise.all(Object.values(commands).map((load) => load()));
  // registered group by group: the help shows the groups in the order their first command was added
  modules.sort((a, b) => GROUPS.indexOf(a.help.group) - GROUPS.indexOf(b.help.group));
  for (const { register, help } of modules) {
    program.commandsGroup(`${help.group} Commands:`);
    const before = new Set(program.commands);
    register(program, (c, o) => {
      code = c;
      exitNow ||= o?.now === true;
    });
    for (const cmd of program.commands)
      if (!before.has(cmd)) cmd.addHelpText('after', examplesText(program.name(), help.examples) + (help.more?.() ?? ''));
  }
  program.commandsGroup('Other Commands:').helpCommand('help [command]', 'display help for command');
  hintOnUsageErrors(program);
  try {
    await program.parseAsync(argv);
    return code;
  } catch (e) {
    return exitCodeOfThrown('kube-runbook', e);
  }
}
