import { readFile, stat } from 'node:fs/promises';
import { EXIT, KrError } from '../core/errors.js';

/** Larger than any runbook or inventory a person writes; refusing it keeps a wrong path from filling memory. */
const MAX_DOCUMENT_BYTES = 4 * 1024 * 1024;

const REASONS: Record<string, string> = {
  ENOENT: 'no such file',
  ENOTDIR: 'no such file (a part of the path is not a directory)',
  EACCES: 'permission denied',
  EPERM: 'permission denied',
  EISDIR: 'it is a directory',
  ELOOP: 'too many symbolic links',
  ENAMETOOLONG: 'the name is too long',
};

function unreadable(file: string, reason: string, cause?: unknown): KrError {
  return new KrError('FILE_UNREADABLE', `cannot read ${file}: ${reason}`, { exit: EXIT.invalid, cause });
}

/**
 * The bytes of a runbook or inventory file (or, with a larger `maxBytes`, a report); KrError FILE_UNREADABLE (exit 2)
 * naming the file otherwise.
 */
export async function readDocumentFile(file: string, maxBytes = MAX_DOCUMENT_BYTES): Promise<Buffer> {
  try {
    const s = await stat(file);
    if (s.isDirectory()) throw unreadable(file, 'it is a directory');
    if (!s.isFile()) throw unreadable(file, 'not a regular file');
    if (s.size > maxBytes) throw unreadable(file, `too large (${s.size} bytes; at most ${maxBytes})`);
    return await readFile(file);
  } catch (e) {
    if (e instanceof KrError) throw e;
    const code = (e as NodeJS.ErrnoException).code ?? '';
    throw unreadable(file, REASONS[code] ?? (e instanceof Error ? e.message : String(e)), e);
  }
}
