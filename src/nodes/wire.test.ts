import { spawnSync } from 'node:child_process';
import { rmSync } from 'node:fs';
import { afterEach, describe, expect, it } from 'vitest';
import { isKrError } from '../core/errors.js';
import { shq } from '../core/shell.js';
import { markerExists, markerPath } from '../testing/hostile.js';
import { wireScript } from './wire.js';

/** What `sh -s` (dash on Debian) does with these bytes on its stdin. */
function sh(stdin: string | Buffer) {
  const r = spawnSync('sh', ['-s'], { input: stdin });
  return { code: r.status, stdout: r.stdout.toString('utf8'), stderr: r.stderr.toString('utf8') };
}

const markers: string[] = [];
const marker = () => {
  const m = markerPath();
  markers.push(m);
  return m;
};
afterEach(() => {
  for (const m of markers.splice(0)) rmSync(m, { force: true });
});

describe('wireScript', () => {
  it('runs the script with the exit code it ends with', () => {
    const r = sh(wireScript('echo one\necho two >&2\nexit 7'));
    expect(r).toEqual({ code: 7, stdout: 'one\n', stderr: 'two\n' });
  });

  it('gives the script an empty stdin when there is no input, so a reader cannot eat the rest of the script', () => {
    const r = sh(wireScript('cat\nread x || echo "read got EOF"\necho after'));
    expect(r.stdout).toBe('read got EOF\nafter\n');
    expect(r.code).toBe(0);
  });

  it('gives the script its input byte for byte, without adding a newline', () => {
    const input = 'line one\n\'quoted\' "double" $(not run) `nor this`\n}\nno newline at the end';
    const r = sh(wireScript('cat\necho "<after>"', input));
    expect(r.stdout).toBe(`${input}<after>\n`);
    expect(sh(wireScript('wc -c', input)).stdout.trim()).toBe(String(Buffer.byteLength(input)));
  });

  it('keeps exit codes and exit from inside the script, with input too', () => {
    expect(sh(wireScript('cat >/dev/null; exit 42', 'x')).code).toBe(42);
    expect(sh(wireScript('false')).code).toBe(1);
    expect(sh(wireScript('true', '')).code).toBe(0);
  });

  it('runs nothing when the transfer is cut anywhere before the end', () => {
    const m = marker();
    const full = wireScript(`touch ${shq(m)}\nread line\necho "$line"\necho done`, `some input\nwith 'quotes' and }\n`);
    const bytes = Buffer.from(full);
    // every cut short of the final "}\n" (the last byte, the newline, is optional)
    for (let cut = 0; cut < bytes.length - 2; cut++) {
      const r = sh(bytes.subarray(0, cut));
      expect(markerExists(m), `cut at ${cut}: ${JSON.stringify(bytes.subarray(0, cut).toString())}`).toBe(false);
      expect(r.stdout).toBe('');
    }
    expect(sh(bytes).stdout).toBe('some input\ndone\n');
    expect(markerExists(m)).toBe(true);
  });

  it('refuses a NUL byte in the script or the input', () => {
    for (const [script, input] of [
      ['echo \0', undefined],
      ['cat', 'a\0b'],
    ] as const) {
      let error: unknown;
      try {
        wireScript(script, input);
      } catch (e) {
        error = e;
      }
      expect(isKrError(error) && error.code).toBe('EXEC_BAD_TEXT');
    }
  });
});
