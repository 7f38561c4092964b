/**
 * The layers of src/, bottom to top. A folder imports only folders of lower layers (never a sibling of its own
 * layer, never one above); `npm test` runs `npm run layers`, which fails on any import against this order and
 * names the import and the rule. docs/architecture.md explains the layers.
 */
const LAYERS = [
  ['core'], //        clock, logger, durations, errors, shell quoting
  ['document'], //    YAML with positions, problems (FILE:LINE:COL)
  ['inventory'], //   how to reach nodes, cluster layout
  ['runbook'], //     the language: schema, selectors, loading
  ['nodes'], //       transports and service managers
  ['kube'], //        client, shared watch, controller settings, versions
  ['forecast'], //    the eviction forecast: the node lifecycle controller's model and its feed
  ['contract'], //    ctx, defineAction, defineProbe, readings, registry
  ['actions', 'probes'], // one module per file
  ['engine'], //      plan, run, rollback, journal, recover
  ['report', 'telemetry'], // renderers of run events; their export as OpenTelemetry traces and metrics
  ['cli'], //         one file per command; the only importer of lab
  ['testing'], //     fakes and testers, imported by tests only (not built into dist/)
];

/** The lab stands beside the CLI: it uses these lower layers, and only the CLI (and tests) import it. */
const LAB_USES = ['core', 'inventory', 'nodes'];

/** Inside the lab, bottom to top. */
const LAB_LAYERS = [['host'], ['install', 'sim'], ['lifecycle']];

const below = (i) => LAYERS.slice(0, i).flat();
const either = (names) => `(${names.join('|')})`;

const layerRules = LAYERS.flatMap((layer, i) =>
  layer.map((folder) => ({
    name: `layer:${folder}`,
    comment: `src/${folder}/ may import only ${below(i).join(', ') || 'nothing of src/'}${folder === 'cli' ? ', lab' : ''}`,
    severity: 'error',
    from: { path: `^src/${folder}/` },
    to: {
      path: '^src/[^/]+/',
      pathNot: [`^src/${either([folder, ...below(i), ...(folder === 'cli' || folder === 'testing' ? ['lab'] : [])])}/`],
    },
  })),
);

const labRules = [
  {
    name: 'layer:lab',
    comment: `src/lab/ may import only ${LAB_USES.join(', ')}`,
    severity: 'error',
    from: { path: '^src/lab/' },
    to: { path: '^src/[^/]+/', pathNot: [`^src/${either(['lab', ...LAB_USES])}/`] },
  },
  ...LAB_LAYERS.flatMap((layer, i) =>
    layer.map((folder) => {
      const lower = LAB_LAYERS.slice(0, i).flat();
      return {
        name: `layer:lab/${folder}`,
        comment: `src/lab/${folder}/ may import only lab/${lower.join(', lab/') || '(nothing else of the lab)'}`,
        severity: 'error',
        from: { path: `^src/lab/${folder}/` },
        to: { path: '^src/lab/[^/]+/', pathNot: [`^src/lab/${either([folder, ...lower])}/`] },
      };
    }),
  ),
  {
    name: 'layer:lab/index',
    comment: 'lab sub-folders do not import the lab entry point (src/lab/index.ts)',
    severity: 'error',
    from: { path: '^src/lab/[^/]+/' },
    to: { path: '^src/lab/index\\.ts$' },
  },
];

module.exports = {
  forbidden: [
    ...layerRules,
    ...labRules,
    {
      name: 'no-circular',
      comment: 'files importing each other in a circle',
      severity: 'error',
      from: { path: '^src/' },
      to: { circular: true },
    },
    {
      name: 'no-testing-in-production',
      comment: 'code that ships must not import src/testing/ (fakes stay out of dist/)',
      severity: 'error',
      from: { path: '^src/', pathNot: ['^src/testing/', '\\.test\\.ts$'] },
      to: { path: '^src/testing/' },
    },
  ],
  options: {
    // tests may reach across layers (through src/testing/ fakes); the rules are about the shipped code
    exclude: { path: ['\\.test\\.ts$', '^node_modules', '^dist'] },
    doNotFollow: { path: 'node_modules' },
    tsPreCompilationDeps: true,
    tsConfig: { fileName: 'tsconfig.json' },
  },
};
