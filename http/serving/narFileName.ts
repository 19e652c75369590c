// The name a stored NAR file has in a cache's URLs, `{52 base-32 characters}.nar.zst`: what a
// serving thread accepts on its NAR route (threadNars.ts) and reads from a narinfo's URL line
// (threadHotCache.ts). The main thread checks a name for real before it grants it.

export const NAR_SUFFIX = '.nar.zst';

/** Whether `file` has that shape. A loop, not a regular expression: it runs for every NAR request, and the expression cost several times as much. */
export function isNarFileName(file: string): boolean {
  if (file.length !== 52 + NAR_SUFFIX.length || !file.endsWith(NAR_SUFFIX)) return false;
  for (let i = 0; i < 52; i++) {
    const c = file.charCodeAt(i);
    if (!((c >= 48 && c <= 57) || (c >= 97 && c <= 122))) return false;
  }
  return true;
}
