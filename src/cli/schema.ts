import { mkdir, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { Option } from 'commander';
import { EXIT } from '../core/errors.js';
import { defaultRegistry as registry } from '../engine/registry.js';
import { PlanJson } from '../report/plan-schema.js';
import { Report } from '../report/schema.js';
import { generate, schemaFiles, type SchemaFile, type SchemaModules } from '../runbook/json-schema.js';
import { out } from './output.js';
import type { CommandHelp, Register } from './types.js';

/** Each action's and probe's params, by id (sorted), for the runbook schema's `with:` completion and checks. */
export async function schemaModules(): Promise<SchemaModules> {
  const modules: SchemaModules = { actions: {}, probes: {} };
  for (const id of registry.ids('action')) modules.actions[id] = (await registry.action(id)).meta;
  for (const id of registry.ids('probe')) modules.probes[id] = (await registry.probe(id)).meta;
  return modules;
}

/** Every schema file `schema --write` writes: runbooks, inventories, the reports runs write, and `plan -o json`. */
export async function allSchemaFiles(): Promise<SchemaFile[]> {
  const report = generate(
    Report,
    'urn:kube-runbook:schema:report:v1',
    'kube-runbook run report',
    "A run's report.json: steps, faults and their reverts, guards' readings and firings, nodes' histories. `kube-runbook report` renders it again.",
  );
  const plan = generate(
    PlanJson,
    'urn:kube-runbook:schema:plan:v1',
    'kube-runbook plan',
    '`kube-runbook plan -o json`: the runbook, inventory, context, safety limits, guards, steps with their resolved targets, remediation, rollback order, recovery objectives and sensitive grants, as the text plan gives them.',
  );
  return [...schemaFiles(await schemaModules()), { name: 'plan.schema.json', text: plan }, { name: 'report.schema.json', text: report }];
}

/** `schema [runbook|inventory|report|plan] [--write] [--out-dir DIR]`: the JSON Schema editors use for runbooks and inventories, and that of reports and plans. */
export const register: Register = (program, done) => {
  program
    .command('schema')
    .description(
      'print the JSON Schema (draft-07) of runbooks, inventories, run reports or `plan -o json`, or write them all (npm run schema)',
    )
    .addArgument(
      program.createArgument('[kind]', 'which schema to print').choices(['runbook', 'inventory', 'report', 'plan']).default('runbook'),
    )
    .option('--write', 'write runbook.schema.json, inventory.schema.json, report.schema.json and plan.schema.json instead of printing')
    .addOption(new Option('--out-dir <dir>', 'directory --write writes into').default('schema'))
    .action(async (kind: 'runbook' | 'inventory' | 'report' | 'plan', opts: { write?: boolean; outDir: string }) => {
      const files = await allSchemaFiles();
      if (opts.write) {
        await mkdir(opts.outDir, { recursive: true });
        for (const f of files) {
          const path = join(opts.outDir, f.name);
          await writeFile(path, f.text);
          out.stdout(`wrote ${path}`);
        }
      } else out.stdout(files.find((f) => f.name === `${kind}.schema.json`)!.text);
      done(EXIT.ok);
    });
};

/** Where `--help` lists it, and its examples. */
export const help: CommandHelp = {
  group: 'Author',
  examples: [
    ['schema runbook > runbook.schema.json', 'the JSON Schema editors use to complete and check runbooks'],
    ['schema --write --out-dir schema', 'write the runbook, inventory, report and plan schemas'],
  ],
};
