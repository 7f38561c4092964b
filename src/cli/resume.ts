import { EXIT, type ExitCode } from '../core/errors.js';
import { redactText } from '../core/redact.js';
import { clearHalt, HALT_NAME } from '../kube/halt.js';
import { type HaltDeps, type HaltFlags, haltOptions, realHaltDeps, whoAmI, withinMs, writeHalt } from './halt.js';
import { out } from './output.js';
import type { CommandHelp, Register } from './types.js';

/** `kube-runbook resume`: clears the halt, recording who and when; prints one line; its exit code. */
export async function resumeCommand(o: HaltFlags, deps: HaltDeps): Promise<ExitCode> {
  const within = withinMs(o.within);
  const by = whoAmI(o.by);
  const { written, error } = await writeHalt(o, deps, 'resume', within, (kube, w) => clearHalt(kube, { ...w, by }));
  const s = written?.state;
  const resumed = s !== undefined && !s.halt;
  if (o.output === 'json')
    out.stdout(
      JSON.stringify(
        {
          halted: !resumed,
          already: written?.already ?? false,
          namespace: o.namespace,
          ...(s?.resumedBy ? { resumedBy: s.resumedBy, resumedAt: s.resumedAt } : {}),
          ...(error ? { error: redactText(error) } : {}),
        },
        null,
        2,
      ),
    );
  else if (!resumed) out.stdout(redactText(`STILL HALTED: ${error ?? 'unknown'}`));
  else if (written?.already)
    out.stdout(`not halted (Lease ${o.namespace}/${HALT_NAME})${s.resumedBy ? `; last resumed by ${s.resumedBy} at ${s.resumedAt}` : ''}`);
  else out.stdout(`resumed by ${s.resumedBy} at ${s.resumedAt} (Lease ${o.namespace}/${HALT_NAME}): runs may start again`);
  return resumed ? EXIT.ok : EXIT.failed;
}

export const register: Register = (program, done) => {
  haltOptions(
    program.command('resume').description('Clear the halt (`kube-runbook halt`): runs may start again; who and when are recorded.'),
    true,
  ).action(async (o: HaltFlags) => done(await resumeCommand(o, realHaltDeps())));
};

export const help: CommandHelp = {
  group: 'Run',
  examples: [['resume --context prod', 'runs may start on prod again']],
};
