import type { Argument, Command, Option } from 'commander';

/**
 * What to offer for the word being typed, worked out from the commander tree itself, so every command, option and
 * choice completes without a list kept by hand. The shell scripts of `kube-runbook completion` ask for it through
 * the hidden `__complete` command; files are left to the shell (`then`), which knows quoting, `~` and directories.
 */

/** After the candidates: nothing else, or the shell's own file completion (YAML files, any file, directories). */
export type Then = 'words' | 'yaml' | 'file' | 'dir';

export interface Candidate {
  value: string;
  description: string;
}

export interface Completion {
  candidates: Candidate[];
  then: Then;
}

/** What the completion reads besides the command tree (tests give their own). */
export interface CompletionSources {
  /** The context names of KUBECONFIG (the file named by --kubeconfig on the line, else the default ones). */
  contexts(kubeconfig: string | undefined): string[];
  /** Action and probe ids, for `describe`. */
  modules(): { id: string; kind: 'action' | 'probe' }[];
}

const words = (candidates: Candidate[]): Completion => ({ candidates, then: 'words' });
const files = (then: Then): Completion => ({ candidates: [], then });
const plain = (values: readonly string[], description = ''): Candidate[] => values.map((value) => ({ value, description }));

/** The first line of a help text, short enough for a completion menu. */
function short(text: string): string {
  const line = text.split('\n')[0] ?? '';
  return line.length > 72 ? `${line.slice(0, 71)}…` : line;
}

function findOption(cmd: Command, flag: string): Option | undefined {
  for (let c: Command | null = cmd; c; c = c.parent) {
    const found = c.options.find((o) => o.long === flag || o.short === flag);
    if (found) return found;
  }
  return undefined;
}

function subcommand(cmd: Command, name: string): Command | undefined {
  return cmd.commands.find((c) => c.name() === name || c.aliases().includes(name));
}

/** The value of an option, by its choices, else by what it names: a context, an inventory, a file, a directory. */
function optionValue(option: Option, kubeconfig: string | undefined, sources: CompletionSources): Completion {
  if (option.argChoices?.length) return words(plain(option.argChoices));
  if (option.long === '--context') return words(plain(sources.contexts(kubeconfig), 'kubeconfig context'));
  if (option.long === '--inventory') return files('yaml');
  if (/<file>|\[file\]/.test(option.flags)) return files('file');
  if (/<dir>|\[dir\]/.test(option.flags)) return files('dir');
  return words([]);
}

/** A positional argument, by its choices, else by its name: runbooks and inventories are YAML files. */
function argumentValue(cmd: Command, arg: Argument | undefined, sources: CompletionSources): Completion {
  if (!arg) return words([]);
  if (arg.argChoices?.length) return words(plain(arg.argChoices));
  if (cmd.name() === 'describe') return words(sources.modules().map((m) => ({ value: m.id, description: m.kind })));
  if (['runbook', 'files', 'file'].includes(arg.name())) return files('yaml');
  return words([]);
}

/**
 * The completion of the last of WORDS (the words after the program's name, the last one being typed, maybe empty).
 * Options given before it are skipped with their values; `--kubeconfig` among them is where contexts are read.
 */
export function completeWords(program: Command, given: readonly string[], sources: CompletionSources): Completion {
  const help = program.createHelp();
  const cur = given.at(-1) ?? '';
  let cmd = program;
  let positionals = 0;
  let afterDashes = false;
  let pending: Option | undefined;
  let kubeconfig: string | undefined;
  for (const w of given.slice(0, -1)) {
    if (pending) {
      if (pending.long === '--kubeconfig') kubeconfig = w;
      pending = undefined;
    } else if (!afterDashes && w === '--') afterDashes = true;
    else if (!afterDashes && w.startsWith('-') && w !== '-') {
      const eq = w.indexOf('=');
      const option = findOption(cmd, eq < 0 ? w : w.slice(0, eq));
      if (option?.required && eq < 0) pending = option;
      if (option?.long === '--kubeconfig' && eq >= 0) kubeconfig = w.slice(eq + 1);
    } else {
      const sub = positionals === 0 && !afterDashes ? subcommand(cmd, w) : undefined;
      if (sub) cmd = sub;
      else positionals++;
    }
  }
  let found: Completion;
  if (pending) found = optionValue(pending, kubeconfig, sources);
  else if (!afterDashes && cur.startsWith('-'))
    found = words(
      help.visibleOptions(cmd).flatMap((o) => {
        const flag = o.long ?? o.short;
        return flag ? [{ value: flag, description: short(o.description) }] : [];
      }),
    );
  else {
    const subs = help.visibleCommands(cmd);
    if (positionals === 0 && subs.length > 0) found = words(subs.map((c) => ({ value: c.name(), description: short(c.description()) })));
    else {
      const args = cmd.registeredArguments;
      const last = args.at(-1);
      found = argumentValue(cmd, args[positionals] ?? (last?.variadic ? last : undefined), sources);
    }
  }
  return { candidates: found.candidates.filter((c) => c.value.startsWith(cur)), then: found.then };
}

/** What `__complete` prints: `VALUE<TAB>DESCRIPTION` a line, then `:THEN` (what the shell does besides). */
export function completionText(c: Completion): string {
  return [...c.candidates.map((x) => `${x.value}\t${x.description}`), `:${c.then}`].join('\n');
}

/**
 * Cobra's ShellCompDirective values (spf13/cobra completions.go), which kubectl reads from a plugin's completion:
 * NoFileComp 4, FilterFileExt 8 (the candidates are the extensions), FilterDirs 16; 0 lets the shell complete files.
 */
const COBRA_DIRECTIVE: Record<Then, number> = { words: 4, yaml: 8, file: 0, dir: 16 };

/** The same completion in Cobra's protocol: a candidate per line (TAB, its description), then `:DIRECTIVE`. */
export function cobraText(c: Completion): string {
  const candidates =
    c.then === 'yaml' ? ['yaml', 'yml'] : c.candidates.map((x) => (x.description ? `${x.value}\t${x.description}` : x.value));
  return [...candidates, `:${COBRA_DIRECTIVE[c.then]}`].join('\n');
}
