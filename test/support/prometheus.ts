// A strict reader of the Prometheus text exposition format (version 0.0.4), so tests read a scrape
// the way Prometheus does rather than by matching lines. It throws on anything Prometheus would
// refuse or misread: a sample before its family's TYPE, a family split in two, a bad name, label
// or value, a repeated series, a histogram whose buckets are not cumulative or lack +Inf, or whose
// +Inf bucket differs from its _count. (The npm parser tried first dropped every histogram's labels.)

export interface Scrape {
  /** the families by name, with their TYPE */
  types: Map<string, string>;
  /** a counter's or gauge's value, or a histogram's _count, for exactly these labels; 0 when absent */
  value(name: string, labels?: Record<string, string>): number;
  /** the sum over every series of a family whose labels include `labels` */
  sum(name: string, labels?: Record<string, string>): number;
  /** every label set of a family (a histogram's without le) */
  labelSets(name: string): Record<string, string>[];
  /** how many series the scrape holds (each bucket, _sum and _count counted) */
  seriesCount: number;
}

interface Series {
  labels: Record<string, string>;
  value: number;
}

const NAME = /^[a-zA-Z_:][a-zA-Z0-9_:]*$/;
const LABEL_NAME = /^[a-zA-Z_][a-zA-Z0-9_]*$/;
const TYPES = new Set(['counter', 'gauge', 'histogram', 'summary', 'untyped']);

/** As Prometheus reads a value (Go's ParseFloat): NaN and Inf in any case, with an optional sign. */
function parseValue(text: string, line: string): number {
  const lower = text.toLowerCase();
  if (lower === '+inf' || lower === 'inf') return Infinity;
  if (lower === '-inf') return -Infinity;
  if (lower === 'nan') return NaN;
  if (!/^[-+]?(\d+\.?\d*|\.\d+)([eE][-+]?\d+)?$/.test(text)) throw new Error(`bad sample value in: ${line}`);
  return Number(text);
}

/** `{a="x",b="y"}` from `i` (at the brace): the labels and the index after the closing brace. */
function parseLabels(line: string, start: number): { labels: Record<string, string>; end: number } {
  const labels: Record<string, string> = {};
  let i = start + 1;
  while (line[i] !== '}') {
    const eq = line.indexOf('=', i);
    if (eq < 0) throw new Error(`bad labels in: ${line}`);
    const name = line.slice(i, eq);
    if (!LABEL_NAME.test(name)) throw new Error(`bad label name "${name}" in: ${line}`);
    if (name in labels) throw new Error(`label "${name}" twice in: ${line}`);
    if (line[eq + 1] !== '"') throw new Error(`unquoted label value in: ${line}`);
    let value = '';
    let j = eq + 2;
    for (;;) {
      const c = line[j];
      if (c === undefined) throw new Error(`unterminated label value in: ${line}`);
      if (c === '"') break;
      if (c === '\\') {
        const next = line[j + 1];
        if (next === 'n') value += '\n';
        else if (next === '\\' || next === '"') value += next;
        else throw new Error(`bad escape in: ${line}`);
        j += 2;
        continue;
      }
      value += c;
      j++;
    }
    labels[name] = value;
    i = j + 1;
    if (line[i] === ',') i++;
    else if (line[i] !== '}') throw new Error(`bad labels in: ${line}`);
  }
  return { labels, end: i + 1 };
}

const keyOf = (labels: Record<string, string>): string => JSON.stringify(Object.entries(labels).sort(([a], [b]) => a.localeCompare(b)));

export function parseScrape(text: string): Scrape {
  const types = new Map<string, string>();
  const samples = new Map<string, Series[]>();
  const seen = new Set<string>();
  const closed = new Set<string>();
  let current: string | null = null;
  let seriesCount = 0;
  const familyOf = (sample: string): string => {
    for (const suffix of ['_bucket', '_sum', '_count']) {
      const base = sample.slice(0, -suffix.length);
      if (sample.endsWith(suffix) && ['histogram', 'summary'].includes(types.get(base) ?? '')) return base;
    }
    return sample;
  };
  for (const line of text.split('\n')) {
    if (line === '') continue;
    if (line.startsWith('#')) {
      const m = /^# (HELP|TYPE) (\S+) ?(.*)$/.exec(line);
      if (!m) continue; // a comment
      const [, kind, name = '', rest = ''] = m;
      if (!NAME.test(name)) throw new Error(`bad metric name in: ${line}`);
      if (name !== current) {
        if (current !== null) closed.add(current);
        if (closed.has(name)) throw new Error(`family ${name} appears twice`);
        current = name;
      }
      if (kind === 'TYPE') {
        if (!TYPES.has(rest)) throw new Error(`bad type in: ${line}`);
        if (types.has(name)) throw new Error(`TYPE twice for ${name}`);
        types.set(name, rest);
      }
      continue;
    }
    const nameEnd = line.search(/[{ ]/);
    if (nameEnd <= 0) throw new Error(`bad sample line: ${line}`);
    const name = line.slice(0, nameEnd);
    if (!NAME.test(name)) throw new Error(`bad metric name in: ${line}`);
    let labels: Record<string, string> = {};
    let rest = line.slice(nameEnd);
    if (line[nameEnd] === '{') {
      const parsed = parseLabels(line, nameEnd);
      labels = parsed.labels;
      rest = line.slice(parsed.end);
    }
    const fields = rest.trim().split(/ +/);
    if (!rest.startsWith(' ') || fields.length < 1 || fields.length > 2) throw new Error(`bad sample line: ${line}`);
    const value = parseValue(fields[0]!, line);
    const family = familyOf(name);
    if (family !== current || !types.has(family)) throw new Error(`sample of ${family} outside its family (TYPE first, one block): ${line}`);
    const key = `${name}${keyOf(labels)}`;
    if (seen.has(key)) throw new Error(`series twice: ${line}`);
    seen.add(key);
    seriesCount++;
    const list = samples.get(name) ?? [];
    list.push({ labels, value });
    samples.set(name, list);
  }

  // Histograms: cumulative buckets ending in +Inf, equal to _count, per label set.
  for (const [name, type] of types) {
    if (type !== 'histogram') continue;
    const buckets = new Map<string, { le: number; value: number }[]>();
    for (const b of samples.get(`${name}_bucket`) ?? []) {
      const { le, ...others } = b.labels;
      if (le === undefined) throw new Error(`${name}_bucket without le`);
      const k = keyOf(others);
      buckets.set(k, [...(buckets.get(k) ?? []), { le: parseValue(le, `le="${le}"`), value: b.value }]);
    }
    for (const c of samples.get(`${name}_count`) ?? []) {
      const list = buckets.get(keyOf(c.labels)) ?? [];
      const inf = list.find((b) => b.le === Infinity);
      if (inf === undefined || inf.value !== c.value) throw new Error(`${name}${keyOf(c.labels)}: the +Inf bucket is not _count`);
      for (let i = 1; i < list.length; i++) {
        if (list[i]!.le <= list[i - 1]!.le || list[i]!.value < list[i - 1]!.value) throw new Error(`${name}${keyOf(c.labels)}: buckets are not cumulative`);
      }
    }
  }

  const seriesOf = (name: string): Series[] => samples.get(types.get(name) === 'histogram' ? `${name}_count` : name) ?? [];
  const includes = (have: Record<string, string>, want: Record<string, string>): boolean => Object.entries(want).every(([k, v]) => have[k] === v);
  return {
    types,
    seriesCount,
    value(name, labels = {}) {
      return seriesOf(name).find((s) => keyOf(s.labels) === keyOf(labels))?.value ?? 0;
    },
    sum(name, labels = {}) {
      return seriesOf(name).filter((s) => includes(s.labels, labels)).reduce((n, s) => n + s.value, 0);
    },
    labelSets(name) {
      return seriesOf(name).map((s) => s.labels);
    },
  };
}
