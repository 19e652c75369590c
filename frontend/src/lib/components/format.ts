// Formatting shared by pages: byte sizes as a person reads them.

/** 1536 → "1.5 KiB"; binary units, as Nix prints NAR sizes. */
export function bytes(n: number): string {
  const units = ['B', 'KiB', 'MiB', 'GiB', 'TiB'];
  let value = n;
  let unit = 0;
  while (value >= 1024 && unit < units.length - 1) {
    value /= 1024;
    unit++;
  }
  return unit === 0 ? `${n} B` : `${value.toFixed(1)} ${units[unit]}`;
}

/** An ApiFailure or any other error as the text to show. */
export const messageOf = (e: unknown): string => (e instanceof Error ? e.message : String(e));
