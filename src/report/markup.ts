/**
 * Text for XML and HTML: the five special characters escaped, and the control characters XML 1.0 has no place
 * for dropped (runbook names and probe details are user text and may hold anything).
 */
export const escapeMarkup = (s: string): string =>
  [...s]
    .filter((c) => c >= ' ' || c === '\t' || c === '\n' || c === '\r')
    .join('')
    .replace(/[&<>"']/g, (c) => ({ '&': '&amp;', '<': '&lt;', '>': '&gt;', '"': '&quot;', "'": '&#39;' })[c]!);
