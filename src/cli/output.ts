/** Output streams of the CLI, in one place so tests can capture them. */
export const out = {
  stdout: (text: string) => process.stdout.write(text.endsWith('\n') ? text : `${text}\n`),
  stderr: (text: string) => process.stderr.write(text.endsWith('\n') ? text : `${text}\n`),
};
