import { existsSync } from 'node:fs';
import { chmod, mkdir, readFile, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { silentLogger } from 'kube-runbook/internal/core/logger.js';
import { sha256 } from './binaries.js';
import { ensureOtelcol, OTELCOL_MAIN, otelcolGoMod } from './otelcol.js';
import { tempDirEach } from 'kube-runbook/internal/testing/temp-dir.js';

describe("the lab's OpenTelemetry Collector build", () => {
  let root = '';
  tempDirEach('kr-otelcol-', (d) => (root = d));

  it('requires the receiver, the exporters and the command at one release, and the main registers exactly those', () => {
    const mod = otelcolGoMod();
    const required = [...mod.matchAll(/^\t(\S+) v(\S+)$/gm)].map((m) => [m[1], m[2]]);
    const core = required.filter(([m]) => !m!.includes('confmap')).map(([, v]) => v);
    expect(new Set(core).size).toBe(1);
    for (const pkg of [
      'go.opentelemetry.io/collector/receiver/otlpreceiver',
      'github.com/open-telemetry/opentelemetry-collector-contrib/exporter/fileexporter',
      'go.opentelemetry.io/collector/exporter/debugexporter',
    ]) {
      expect(mod).toContain(`\t${pkg} v`);
      expect(OTELCOL_MAIN).toContain(`"${pkg}"`);
    }
    expect(OTELCOL_MAIN).toContain('otlpreceiver.NewFactory()');
    expect(OTELCOL_MAIN).toContain('fileexporter.NewFactory(), debugexporter.NewFactory()');
  });

  it('takes a cached build whose checksum holds; builds again when it does not', async () => {
    const dir = join(root, 'otelcol-0.165.0');
    await mkdir(dir, { recursive: true });
    await writeFile(join(dir, 'otelcol'), '#!/bin/sh\n');
    await chmod(join(dir, 'otelcol'), 0o755);
    const manifest = (sum: string) =>
      writeFile(
        join(dir, 'manifest.json'),
        JSON.stringify({ kind: 'kube-runbook/otelcol', version: '0.165.0', files: { otelcol: { sha256: sum, size: 10 } } }),
      );
    // a build is stopped before it starts: only the cached binary can come back
    const stopped = AbortSignal.abort();
    await manifest(await sha256(join(dir, 'otelcol')));
    expect(await ensureOtelcol({ log: silentLogger, signal: stopped }, root)).toEqual({ binary: join(dir, 'otelcol'), version: '0.165.0' });
    expect(existsSync(join(root, 'build-otelcol'))).toBe(false);
    await manifest('0'.repeat(64));
    await expect(ensureOtelcol({ log: silentLogger, signal: stopped }, root)).rejects.toThrow();
    expect(await readFile(join(root, 'build-otelcol', 'main.go'), 'utf8')).toBe(OTELCOL_MAIN);
  });
});
