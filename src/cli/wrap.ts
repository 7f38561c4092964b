/**
 * TEXT wrapped at WIDTH columns: words move to the next line, each line after the first starts with INDENT (the
 * first with FIRST); a word wider than a line is cut. Lines of TEXT stay lines.
 */
export function wrap(text: string, width: number, indent = '', first = indent): string[] {
  const lines: string[] = [];
  for (const para of text.split('\n')) {
    let line = first;
    let empty = true;
    const start = () => {
      line = indent;
      empty = true;
    };
    for (let word of para.split(/\s+/).filter(Boolean)) {
      if (!empty && line.length + 1 + word.length > width) {
        lines.push(line);
        start();
      }
      while (line.length + (empty ? 0 : 1) + word.length > width) {
        const room = Math.max(width - line.length - (empty ? 0 : 1), 1);
        lines.push(`${line}${empty ? '' : ' '}${word.slice(0, room)}`);
        word = word.slice(room);
        start();
      }
      line += `${empty ? '' : ' '}${word}`;
      empty = false;
    }
    lines.push(line.trimEnd());
    first = indent;
  }
  return lines;
}

/** A line cut into pieces of at most WIDTH columns (for text that must keep its words, such as YAML). */
export const fold = (line: string, width: number): string[] =>
  line.length <= width ? [line] : [line.slice(0, width), ...fold(line.slice(width), width)];

/** The width to wrap at: the terminal's, else 80 columns. */
export const terminalWidth = (stream: { isTTY?: boolean; columns?: number } = process.stdout): number =>
  stream.isTTY && stream.columns ? stream.columns : 80;
