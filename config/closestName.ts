/** Edit distance, case-insensitive: a typo in a key's case counts as nothing. */
function distance(a: string, b: string): number {
  const x = a.toLowerCase();
  const y = b.toLowerCase();
  let previous = Array.from({ length: y.length + 1 }, (_, i) => i);
  for (let i = 1; i <= x.length; i++) {
    const current = [i];
    for (let j = 1; j <= y.length; j++) {
      const substitution = (previous[j - 1] ?? 0) + (x[i - 1] === y[j - 1] ? 0 : 1);
      current.push(Math.min((previous[j] ?? 0) + 1, (current[j - 1] ?? 0) + 1, substitution));
    }
    previous = current;
  }
  return previous[y.length] ?? 0;
}

/**
 * The candidate nearest to `name`, if it is near enough to be a typo: at most a third of the
 * name's length apart, or an exact match of the last segment (`bytesBudget` → `upload.bytesBudget`).
 */
export function closestName(name: string, candidates: readonly string[]): string | undefined {
  let best: string | undefined;
  let bestDistance = Infinity;
  for (const candidate of candidates) {
    const d = distance(name, candidate);
    if (d < bestDistance) [best, bestDistance] = [candidate, d];
  }
  if (best !== undefined && bestDistance <= Math.max(2, Math.floor(name.length / 3))) return best;
  const bySuffix = candidates.filter((c) => c.toLowerCase().endsWith(`.${name.toLowerCase()}`));
  return bySuffix.length === 1 ? bySuffix[0] : undefined;
}

export function didYouMean(name: string, candidates: readonly string[]): string {
  const closest = closestName(name, candidates);
  return closest === undefined ? '' : `; did you mean "${closest}"?`;
}
