// Counter and histogram families whose exposition lines are rendered once per series, not once per
// scrape (issue 21: a scrape of 10,000 series within 50 ms). prom-client formats and escapes every
// label of every series at every scrape; here each child keeps its line prefix
// (`name{a="x",b="y"} `) from its first use, and a scrape only appends numbers. Used for the
// families that grow with tenants' data or with routes (per cache, per route group); the few small
// families stay plain prom-client metrics.

/** A family's values as data (for OTLP and tests): prom-client's getMetricsAsJSON shape, trimmed. */
export interface FamilySnapshot {
  name: string;
  help: string;
  type: 'counter' | 'gauge' | 'histogram' | 'summary';
  values: { metricName?: string; labels: Record<string, string | number>; value: number }[];
}

/** A label value as the text format wants it: backslash, double quote and newline escaped. */
const escapeLabel = (value: string): string => value.replace(/\\/g, '\\\\').replace(/"/g, '\\"').replace(/\n/g, '\\n');
const escapeHelp = (help: string): string => help.replace(/\\/g, '\\\\').replace(/\n/g, '\\n');

/** A sample value as Prometheus reads it (Go's ParseFloat). */
export function formatValue(value: number): string {
  if (Number.isNaN(value)) return 'NaN';
  if (value === Infinity) return '+Inf';
  if (value === -Infinity) return '-Inf';
  return String(value);
}

function labelText(names: readonly string[], values: readonly string[], extra = ''): string {
  const parts = names.map((name, i) => `${name}="${escapeLabel(values[i] ?? '')}"`);
  if (extra !== '') parts.push(extra);
  return parts.length === 0 ? '' : `{${parts.join(',')}}`;
}

function labelObject(names: readonly string[], values: readonly string[]): Record<string, string> {
  const labels: Record<string, string> = {};
  names.forEach((name, i) => (labels[name] = values[i] ?? ''));
  return labels;
}

/** What KilnRegistry needs of a family: its text and, for OTLP and JSON readers, its values. */
export interface PrerenderedFamily {
  readonly name: string;
  render(): string;
  get(): FamilySnapshot;
}

interface CounterChild {
  readonly values: readonly string[];
  readonly prefix: string;
  value: number;
}

export class CounterFamily<L extends string> implements PrerenderedFamily {
  private readonly children = new Map<string, CounterChild>();
  private readonly header: string;

  constructor(readonly name: string, readonly help: string, readonly labelNames: readonly L[]) {
    this.header = `# HELP ${name} ${escapeHelp(help)}\n# TYPE ${name} counter\n`;
  }

  /** The child for these label values (in labelNames' order), made on first use. */
  child(...values: string[]): { inc(by?: number): void } {
    const key = values.join('\u0000');
    let child = this.children.get(key);
    if (child === undefined) {
      child = { values, prefix: `${this.name}${labelText(this.labelNames, values)} `, value: 0 };
      this.children.set(key, child);
    }
    const found = child;
    return { inc: (by = 1) => (found.value += by) };
  }

  render(): string {
    let text = this.header;
    for (const child of this.children.values()) text += `${child.prefix}${formatValue(child.value)}\n`;
    return text;
  }

  get(): FamilySnapshot {
    return {
      name: this.name, help: this.help, type: 'counter',
      values: [...this.children.values()].map((c) => ({ labels: labelObject(this.labelNames, c.values), value: c.value })),
    };
  }
}

interface HistogramChild {
  readonly values: readonly string[];
  /** one prefix per bucket (its le), then +Inf */
  readonly bucketPrefixes: readonly string[];
  readonly sumPrefix: string;
  readonly countPrefix: string;
  /** observations per bucket, not cumulative; the last is above every bound */
  readonly counts: number[];
  sum: number;
  count: number;
}

export class HistogramFamily<L extends string> implements PrerenderedFamily {
  private readonly children = new Map<string, HistogramChild>();
  private readonly header: string;

  constructor(readonly name: string, readonly help: string, readonly labelNames: readonly L[], readonly buckets: readonly number[]) {
    this.header = `# HELP ${name} ${escapeHelp(help)}\n# TYPE ${name} histogram\n`;
  }

  child(...values: string[]): { observe(value: number): void } {
    const key = values.join('\u0000');
    let child = this.children.get(key);
    if (child === undefined) {
      const bounds = [...this.buckets.map(formatValue), '+Inf'];
      child = {
        values,
        bucketPrefixes: bounds.map((le) => `${this.name}_bucket${labelText(this.labelNames, values, `le="${le}"`)} `),
        sumPrefix: `${this.name}_sum${labelText(this.labelNames, values)} `,
        countPrefix: `${this.name}_count${labelText(this.labelNames, values)} `,
        counts: new Array<number>(bounds.length).fill(0), sum: 0, count: 0,
      };
      this.children.set(key, child);
    }
    const found = child;
    return {
      observe: (value: number) => {
        let i = 0;
        while (i < this.buckets.length && value > this.buckets[i]!) i++;
        found.counts[i]! += 1;
        found.sum += value;
        found.count += 1;
      },
    };
  }

  render(): string {
    let text = this.header;
    for (const child of this.children.values()) {
      let cumulative = 0;
      for (let i = 0; i < child.counts.length; i++) {
        cumulative += child.counts[i]!;
        text += `${child.bucketPrefixes[i]!}${cumulative}\n`;
      }
      text += `${child.sumPrefix}${formatValue(child.sum)}\n${child.countPrefix}${child.count}\n`;
    }
    return text;
  }

  get(): FamilySnapshot {
    const values: FamilySnapshot['values'] = [];
    for (const child of this.children.values()) {
      const labels = labelObject(this.labelNames, child.values);
      let cumulative = 0;
      child.counts.forEach((n, i) => {
        cumulative += n;
        values.push({ metricName: `${this.name}_bucket`, labels: { ...labels, le: i < this.buckets.length ? this.buckets[i]! : '+Inf' }, value: cumulative });
      });
      values.push({ metricName: `${this.name}_sum`, labels, value: child.sum }, { metricName: `${this.name}_count`, labels, value: child.count });
    }
    return { name: this.name, help: this.help, type: 'histogram', values };
  }
}
