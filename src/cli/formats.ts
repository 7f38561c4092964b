import { Option } from 'commander';
import { stringify } from 'yaml';

/** The machine-readable forms of `-o`: the same value, as JSON or as YAML. */
export type DataFormat = 'json' | 'yaml';

/**
 * `-o, --output <format>` as every listing and describing command takes it: text, any more its command has, json or
 * yaml; text unless the command says what it shows when the flag is absent (DESCRIPTION then says it).
 */
export function outputOption(more: readonly string[] = [], description?: string): Option {
  const option = new Option('-o, --output <format>', description ?? 'output format').choices(['text', ...more, 'json', 'yaml']);
  return description ? option : option.default('text');
}

export const isData = (format: string): format is DataFormat => format === 'json' || format === 'yaml';

/** VALUE printed as `-o json` or `-o yaml` says: one document, its keys in the order given. */
export function formatData(format: DataFormat, value: unknown): string {
  return format === 'json' ? JSON.stringify(value, null, 2) : stringify(value, { lineWidth: 0, aliasDuplicateObjects: false }).trimEnd();
}
