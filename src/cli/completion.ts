import type { Command } from 'commander';
import { EXIT } from '../core/errors.js';
import { defaultRegistry as registry } from '../engine/registry.js';
import { kubeconfigContexts } from '../kube/kubeconfig.js';
import { cobraText, completeWords, completionText, type CompletionSources } from './complete-words.js';
import { completionScript, SHELLS, type Shell } from './completion-scripts.js';
import { out } from './output.js';
import type { CommandHelp, Register } from './types.js';

/** Contexts from the kubeconfig files kubectl reads (read here: no kubectl needed, and no process per TAB). */
const sources: CompletionSources = {
  contexts: (kubeconfig) => kubeconfigContexts(kubeconfig),
  modules: () => [
    ...registry.ids('action').map((id) => ({ id, kind: 'action' as const })),
    ...registry.ids('probe').map((id) => ({ id, kind: 'probe' as const })),
  ],
};

/**
 * `completion bash|zsh|fish` prints the script to source; the hidden `__complete -- WORDS...` prints what completes
 * the last word (the scripts call it at each TAB).
 */
export const register: Register = (program, done) => {
  program
    .command('completion')
    .description('print a shell completion script: source <(kube-runbook completion bash), zsh likewise, fish: | source')
    .addArgument(program.createArgument('<shell>', 'the shell').choices(SHELLS))
    .action((shell: Shell) => {
      out.stdout(completionScript(shell));
      done(EXIT.ok);
    });
  program
    .command('__complete', { hidden: true })
    .description('print the completions of the last word (for the completion scripts)')
    .argument('[words...]', 'the words after the program name, the last one being completed')
    .option('--cobra', "answer in Cobra's protocol, as kubectl reads a plugin's completion (bin/kubectl_complete-runbook.js)")
    .helpOption(false)
    .allowUnknownOption()
    .action((words: string[], o: { cobra?: boolean }, cmd: Command) => {
      const c = completeWords(cmd.parent ?? program, words.length ? words : [''], sources);
      out.stdout(o.cobra ? cobraText(c) : completionText(c));
      done(EXIT.ok);
    });
};

/** Where `--help` lists it, and its examples. */
export const help: CommandHelp = {
  group: 'Operate',
  examples: [
    ['completion bash > /etc/bash_completion.d/kube-runbook', 'bash completion for every shell'],
    ['completion zsh > "${fpath[1]}/_kube-runbook"', 'zsh completion'],
    ['completion fish | source', 'fish completion for this shell'],
  ],
};
