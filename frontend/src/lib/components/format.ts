// Formatting shared by pages: byte sizes, durations and error messages as a person reads them.

const UNITS = ['B', 'KiB', 'MiB', 'GiB', 'TiB'];

/** 1536 → "1.5 KiB" (binary units, as Nix prints NAR sizes); null → "—" (not known, e.g. not in a cache). */
export function bytes(n: number | null): string {
  if (n === null) return '—';
  let value = n;
  let unit = 0;
  while (value >= 1024 && unit < UNITS.length - 1) {
    value /= 1024;
    unit += 1;
  }
  return unit === 0 ? `${n} B` : `${value.toFixed(1)} ${UNITS[unit]}`;
}

/** The time between two ISO timestamps ("2m 05s"); from `start` to now when `end` is null; "—" without a start. */
export function duration(start: string | null, end: string | null, now = Date.now()): string {
  if (!start) return '—';
  const ms = Math.max(0, (end ? Date.parse(end) : now) - Date.parse(start));
  const s = Math.round(ms / 1000);
  if (s < 60) return `${s}s`;
  const m = Math.floor(s / 60);
  if (m < 60) return `${m}m ${String(s % 60).padStart(2, '0')}s`;
  return `${Math.floor(m / 60)}h ${String(m % 60).padStart(2, '0')}m`;
}

/** An ApiFailure or any other error as the text to show. */
export const messageOf = (e: unknown): string => (e instanceof Error ? e.message : String(e));
