/**
 * Code-unit order of two strings. For names Kubernetes allows (RFC 1123: lowercase letters, digits, '-' and '.')
 * it is the same order as a locale's, at a hundredth of the cost: it matters when thousands of nodes are sorted
 * on every judgement.
 */
export const byCodeUnit = (a: string, b: string): number => (a < b ? -1 : a > b ? 1 : 0);
