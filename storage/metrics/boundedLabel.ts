// A label whose distinct values are capped (metrics.labelTopn): the first N values seen keep their
// own series, later ones are folded into "other". First come, not re-ranked: a value never moves
// between its own series and "other", so every counter stays monotonic for Prometheus' rate().
// Caches, the only label this bounds today, are few and long-lived; their first requests come at
// start, which makes the first N seen the ones that are active.

export const OTHER_LABEL = 'other';

export class BoundedLabel {
  private readonly admitted = new Set<string>();

  constructor(private readonly limit: number) {}

  /** The label value to record `value` under: itself while there is room or once admitted, else "other". */
  value(value: string): string {
    if (this.admitted.has(value)) return value;
    if (this.admitted.size >= this.limit || value === OTHER_LABEL) return OTHER_LABEL;
    this.admitted.add(value);
    return value;
  }
}

/**
 * The top `limit` entries of a snapshot by `weight`, the rest summed under "other": for gauges read
 * at scrape time (storage per cache), where no series has to stay monotonic.
 */
export function topWithOther<T extends { label: string }>(rows: readonly T[], limit: number, weight: (row: T) => number, sum: (rows: readonly T[]) => Omit<T, 'label'>): T[] {
  if (rows.length <= limit) return [...rows];
  const sorted = [...rows].sort((a, b) => weight(b) - weight(a));
  const rest = sorted.slice(limit);
  return [...sorted.slice(0, limit), { ...sum(rest), label: OTHER_LABEL } as T];
}
