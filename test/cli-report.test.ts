import { readFileSync, statSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { parse } from 'yaml';
import { renderJUnit } from '../src/report/junit.js';
import { renderTimeline } from '../src/report/timeline.js';
import { sampleReport } from '../src/testing/sample-report.js';
import { tempDirEach } from '../src/testing/temp-dir.js';
import { runCli } from './helpers/cli.js';

const cli = (...args: string[]) => runCli(args);

describe('kube-runbook report', () => {
  let dir = '';
  tempDirEach('kr-report-', (d) => (dir = d));
  const saved = () => {
    const file = join(dir, 'report.json');
    writeFileSync(file, JSON.stringify(sampleReport(), null, 2));
    return file;
  };

  it("renders a saved report's timeline and JUnit as the run did, readable by their owner only", async () => {
    const html = join(dir, 'out.html');
    const junit = join(dir, 'out.xml');
    const r = await cli('report', saved(), '--html', html, '--junit', junit);
    expect(r.stderr).toBe('');
    expect(r.code).toBe(0);
    expect(r.stdout).toBe(`wrote ${html}\nwrote ${junit}\n`);
    expect(readFileSync(html, 'utf8')).toBe(renderTimeline(sampleReport()));
    expect(readFileSync(junit, 'utf8')).toBe(renderJUnit(sampleReport()));
    expect(statSync(html).mode & 0o777).toBe(0o600);
  });

  it('says in one line what the run did when asked for no file', async () => {
    const r = await cli('report', saved());
    expect(r.code).toBe(0);
    expect(r.stdout).toBe(
      'run r-1 of kubelet-partition on context "lab": aborted (guard eviction forecast violated), took 8s; 1 fault(s), 1 reverted, 1 guard firing(s)\n',
    );
  });

  it('prints the report itself with -o json or -o yaml, saying on stderr what else it wrote', async () => {
    const junit = join(dir, 'out.xml');
    const json = await cli('report', saved(), '-o', 'json', '--junit', junit);
    expect(json.code).toBe(0);
    expect(JSON.parse(json.stdout)).toEqual(sampleReport());
    expect(json.stderr).toBe(`wrote ${junit}\n`);
    const yaml = await cli('report', saved(), '--output', 'yaml', '--json', join(dir, 'copy.json'));
    expect(parse(yaml.stdout)).toEqual(sampleReport());
    expect(JSON.parse(readFileSync(join(dir, 'copy.json'), 'utf8'))).toEqual(sampleReport());
    expect(yaml.stderr).toContain('report --json FILE is deprecated: use -o json > FILE');
  });

  it('refuses a report of a newer version, a broken one, and no source or two: one line each, exit 2', async () => {
    const newer = join(dir, 'newer.json');
    writeFileSync(newer, JSON.stringify({ ...sampleReport(), reportVersion: 99 }));
    const broken = join(dir, 'broken.json');
    writeFileSync(broken, '{\n  "runId": "r-1",\n  "runbook": \n}\n');
    const runs = await Promise.all([
      cli('report', newer),
      cli('report', broken),
      cli('report'),
      cli('report', saved(), '--from-configmap', 'kr/reports'),
    ]);
    expect(runs.map((r) => r.code)).toEqual([2, 2, 2, 2]);
    expect(runs[0]!.stderr).toBe(
      `kube-runbook: ${newer}: reportVersion 99 is newer than this kube-runbook reads (1); render it with the kube-runbook that wrote it, or a newer one [REPORT_TOO_NEW]\n`,
    );
    expect(runs[1]!.stderr).toContain(`${broken}:4:1: not JSON here: value expected`);
    for (const r of runs.slice(2))
      expect(r.stderr).toBe('kube-runbook: give a report.json file or --from-configmap NAMESPACE/NAME (one of them) [REPORT_SOURCE]\n');
  });
});
