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
  ['journal'], //     the run's journal: its file, its schema, its copy in a ConfigMap and the key that signs it
  ['engine'], //      plan, run, rollback, journal, recover
  ['report', 'telemetry'], // renderers of run events; their export as OpenTelemetry traces and metrics
  ['session'], //     one run's wiring besides the engine: observers, the journal's copy, sinks and their order
  ['mcp'], //         the MCP server for AI assistants: tools, resources, prompts, the person's confirmation
  ['cli'], //         one file per command
  ['testing'], //     fakes and testers, imported by tests only (not built into dist/)
];

/**
 * The lab is a package of its own (packages/lab/src/), which imports the product only through the product's
 * internal entry (`kube-runbook/internal/<folder>/...`, package.json's exports), and of it only these folders; its
 * CLI also the CLI's output and exit codes, the kube client (the demo's reading of nodes) and the report's types.
 */
const LAB_USES = ['core', 'inventory', 'nodes'];
const LAB_CLI_USES = [...LAB_USES, 'cli/(output|thrown|types)\\.js$', 'kube/client\\.js$', 'report/collect\\.js$'];

/** Inside the lab, bottom to top. */
const LAB_LAYERS = [['host'], ['install', 'sim'], ['lifecycle'], ['cli']];
const LAB = '^packages/lab/src/';

const below = (i) => LAYERS.slice(0, i).flat();
const either = (names) => `(${names.join('|')})`;

const layerRules = LAYERS.flatMap((layer, i) =>
  layer.map((folder) => ({
    name: `layer:${folder}`,
    comment: `src/${folder}/ may import only ${below(i).join(', ') || 'nothing of src/'}`,
    severity: 'error',
    from: { path: `^src/${folder}/` },
    to: { path: '^src/[^/]+/', pathNot: [`^src/${either([folder, ...below(i)])}/`] },
  })),
);

const labRules = [
  {
    name: 'product-without-lab',
    comment: 'the product (src/) imports nothing of the lab (packages/lab), which it does not ship',
    severity: 'error',
    from: { path: '^src/' },
    to: { path: ['^packages/', '^kube-runbook-lab(/|$)'] },
  },
  {
    name: 'lab:product-entry',
    comment: 'the lab imports the product only as kube-runbook/internal/... (never a relative path into src/ or dist/)',
    severity: 'error',
    from: { path: LAB },
    to: { path: '^(src|dist)/' },
  },
  {
    name: 'lab:product-uses',
    comment: `the lab uses only the product's ${LAB_USES.join(', ')}`,
    severity: 'error',
    from: { path: LAB, pathNot: `${LAB}cli/` },
    to: { path: '^kube-runbook/internal/', pathNot: `^kube-runbook/internal/${either(LAB_USES)}/` },
  },
  {
    name: 'lab:cli-product-uses',
    comment:
      "the lab's CLI uses the product's layers the rest of the lab does, its CLI output and exit codes, the kube client and the report's types",
    severity: 'error',
    from: { path: `${LAB}cli/` },
    to: { path: '^kube-runbook/internal/', pathNot: `^kube-runbook/internal/${either(LAB_CLI_USES)}` },
  },
  ...LAB_LAYERS.flatMap((layer, i) =>
    layer.map((folder) => {
      const lower = LAB_LAYERS.slice(0, i).flat();
      return {
        name: `layer:lab/${folder}`,
        comment: `packages/lab/src/${folder}/ may import only ${lower.join(', ') || '(nothing else of the lab)'}`,
        severity: 'error',
        from: { path: `${LAB}${folder}/` },
        to: { path: `${LAB}[^/]+/`, pathNot: [`${LAB}${either([folder, ...lower])}/`] },
      };
    }),
  ),
  {
    name: 'layer:lab/index',
    comment: "the lab's folders but its CLI do not import its entry point (packages/lab/src/index.ts)",
    severity: 'error',
    from: { path: `${LAB}[^/]+/`, pathNot: `${LAB}cli/` },
    to: { path: `${LAB}index\\.ts$` },
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
      from: { path: '^(src|packages/lab/src)/' },
      to: { circular: true },
    },
    {
      name: 'no-testing-in-production',
      comment: 'code that ships must not import src/testing/ (fakes stay out of dist/)',
      severity: 'error',
      from: { path: '^(src|packages/lab/src)/', pathNot: ['^src/testing/', '^packages/lab/src/testing/', '\\.test\\.ts$'] },
      to: { path: ['^src/testing/', '^packages/lab/src/testing/', '^kube-runbook/internal/testing/'] },
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
