import { type ChildProcessWithoutNullStreams, spawn } from 'node:child_process';
import { stripVTControlCharacters } from 'node:util';

/**
 * COMMAND (a shell command line) on a terminal: util-linux `script` makes the pty. Keys go in, and a test waits for
 * what the screen shows rather than for a time.
 */
export class Terminal {
  private screen = '';
  private readonly proc: ChildProcessWithoutNullStreams;

  constructor(command: string, o: { cwd: string; env: Record<string, string | undefined> }) {
    this.proc = spawn('script', ['-qfec', command, '/dev/null'], {
      cwd: o.cwd,
      env: { ...process.env, TERM: 'dumb', INPUTRC: '/dev/null', COLUMNS: '200', ...o.env },
    });
    this.proc.stdout.on('data', (d: Buffer) => (this.screen += d.toString()));
  }

  /**
   * Types KEYS, waits until the screen so far matches PATTERN (anchor it at the end), and returns what it showed since.
   * Both are the text shown, without the terminal's control sequences: a shell with line editing (zsh under xterm)
   * writes some after its prompt (clear to the end of the line, bracketed paste on), and whether they come in the
   * same read as the prompt is a matter of timing.
   */
  async type(keys: string, pattern: RegExp): Promise<string> {
    const from = this.screen.length;
    this.proc.stdin.write(keys);
    while (!pattern.test(stripVTControlCharacters(this.screen))) {
      if (this.proc.exitCode !== null) throw new Error(`the terminal ended (exit ${this.proc.exitCode}); it showed:\n${this.screen}`);
      await new Promise<void>((resolve) => {
        const next = () => {
          this.proc.stdout.off('data', next);
          this.proc.off('close', next);
          resolve();
        };
        this.proc.stdout.on('data', next);
        this.proc.on('close', next);
      });
    }
    return stripVTControlCharacters(this.screen.slice(from));
  }

  /** Ends the input and resolves with the command's exit code. */
  end(keys = ''): Promise<number | null> {
    return new Promise((resolve) => {
      if (this.proc.exitCode !== null) return resolve(this.proc.exitCode);
      this.proc.once('close', resolve);
      this.proc.stdin.end(keys);
    });
  }
}
