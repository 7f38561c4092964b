import { Command } from 'commander';
import { EXIT, type ExitCode } from 'kube-runbook/internal/core/errors.js';
import { toolVersion } from 'kube-runbook/internal/core/version.js';
import { dropOutputOnClosedPipes, out } from 'kube-runbook/internal/cli/output.js';
import { exitCodeOfThrown } from 'kube-runbook/internal/cli/thrown.js';
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
    return exitCodeOfThrown('kube-runbook-lab', e);
  }
}
