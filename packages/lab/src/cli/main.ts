import { Command, CommanderError } from 'commander';
import { EXIT, type ExitCode, isKrError, messageOf } from 'kube-runbook/internal/core/errors.js';
import { redactText } from 'kube-runbook/internal/core/redact.js';
import { toolVersion } from 'kube-runbook/internal/core/version.js';
import { dropOutputOnClosedPipes, out } from 'kube-runbook/internal/cli/output.js';
import { register as registerDemo } from './demo.js';
import { register as registerLab } from './lab.js';

/** Runs the lab's CLI (`kube-runbook-lab`) and sets process.exitCode: the only place in the lab that does. */
export async function main(argv: string[]): Promise<void> {
  dropOutputOnClosedPipes();
  let exitNow = false;
  const code = await runLabCli(argv, (now) => (exitNow ||= now));
  process.exitCode = code;
  if (exitNow) process.exit(code);
}

async function runLabCli(argv: string[], exitNow: (now: boolean) => void): Promise<ExitCode> {
  let code: ExitCode = EXIT.ok;
  const program = new Command('kube-runbook-lab')
    .description(
      'A real control plane (etcd, kube-apiserver, kube-controller-manager, kube-scheduler) with simulated or real kubelets on this machine, for kube-runbook.',
    )
    .version(toolVersion(), '-V, --version')
    .showHelpAfterError()
    .exitOverride()
    .configureOutput({ writeOut: (s) => out.stdout(s), writeErr: (s) => out.stderr(s) });
  const done = (c: ExitCode, o?: { now?: boolean }) => {
    code = c;
    exitNow(o?.now === true);
  };
  registerLab(program, done);
  registerDemo(program, done);
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
      out.stderr(`kube-runbook-lab: ${redactText(e.message)}${e.code ? ` [${e.code}]` : ''}`);
      for (const d of e.details) out.stderr(redactText(d));
      return e.exit;
    }
    out.stderr(`kube-runbook-lab: unexpected error: ${redactText(messageOf(e))}`);
    if (process.env.KUBE_RUNBOOK_DEBUG && e instanceof Error && e.stack) out.stderr(redactText(e.stack));
    return EXIT.failed;
  }
}
