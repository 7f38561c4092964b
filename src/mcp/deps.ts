import type { Reading } from '../contract/probe.js';
import type { Plan } from '../engine/plan.js';
import type { RunReport } from '../report/collect.js';

/** An action or a probe as `actions` and `probes` list it. */
export interface ModuleLine {
  id: string;
  summary: string;
}

/** One file as `validate` checks it: problems and warnings as `FILE:LINE:COL: message` lines. */
export interface Validated {
  file: string;
  ok: boolean;
  kind: string | null;
  summary?: string;
  problems: string[];
  warnings: string[];
}

/** One permission the plan needs, as preflight checks it (a SelfSubjectAccessReview): allowed, denied or not asked. */
export interface AccessLine {
  check: string;
  by: string[];
  allowed: boolean | null;
  error?: string;
}

/** A runbook planned on the cluster: the plan, the context it was planned on, and what RBAC says of its permissions. */
export interface Planned {
  plan: Plan;
  context: string | null;
  /** Why the cluster could not be used (the plan's label selectors and version fallbacks are then unresolved). */
  clusterError?: string;
  access: AccessLine[];
}

/** A run or a recover started as a process of its own: what the person and the assistant are told of it. */
export interface Launched {
  pid: number;
  /** Where its report.json goes (a run), and its output log. */
  dir: string;
  /** Settles with the process's exit code when it ends. */
  exited: Promise<number | null>;
}

/**
 * What the MCP server reads and starts, handed in by the `mcp` command: the same functions the CLI's commands use
 * (the server imports nothing of src/cli/), so that its tests drive it against fakes and nothing runs for real.
 */
export interface McpDeps {
  /** Every action and probe id with its summary, sorted. */
  modules(): Promise<{ actions: ModuleLine[]; probes: ModuleLine[] }>;
  /** `describe ID -o json`: one entry per action or probe of that id (none when unknown). */
  describe(id: string): Promise<unknown[]>;
  /** `validate FILE [-i INVENTORY]`. */
  validate(file: string): Promise<Validated[]>;
  /** `plan FILE` on the server's inventory and context, with the RBAC preflight checks (read-only). */
  plan(file: string): Promise<Planned>;
  /** One reading of the eviction-forecast probe on the server's context, once its watches synced. */
  forecast(): Promise<Reading>;
  /** `audit -o json` on the server's context (and inventory). */
  audit(): Promise<unknown>;
  /** The run lock of the server's context (its holder, or null), read-only. */
  runLock(): Promise<unknown>;
  /** The state directory's runs directory (journals of runs on this machine). */
  runsDir(): string;
  /** Where the reports of the runs this server starts go, one directory per run. */
  reportsDir(): string;
  /** `kube-runbook ARGS...` as a process of its own (never through a shell), its output to DIR/output.log. */
  launch(args: string[], dir: string): Promise<Launched>;
  /** A saved report, checked as `kube-runbook report` checks it. */
  readReport(file: string): Promise<RunReport>;
  /**
   * `kube-runbook halt`: sets the cluster's halt, recorded as set through CLIENT; where it cannot be written, stops this
   * machine's runs directly (they roll back). One line on what it did; throws when it did neither.
   */
  halt(reason: string, client: string): Promise<string>;
  /** The halt as it is now: whether it is set, and one line on it. */
  haltState(): Promise<{ halted: boolean; line: string }>;
  /** `kube-runbook resume`: clears the halt, recorded as cleared through CLIENT; one line on what it did. */
  resume(client: string): Promise<string>;
}

/** How the server was started (`kube-runbook mcp ...`). */
export interface McpOptions {
  /** The runbook files the server may plan and run, by name (metadata.name or file name): never runbook text. */
  runbooks: string[];
  inventory?: string;
  context?: string;
  kubeconfig?: string;
  /** `--allow-runs`: the run and recover tools exist (each still needs the person's yes). */
  allowRuns: boolean;
  /** Where the shipped runbooks and schemas are (resources). */
  packageDir: string;
}
