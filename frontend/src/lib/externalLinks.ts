// Links to other sites that came from outside kiln (a Git host's answer): only http(s) URLs become
// links, so a hostile host's `javascript:` or `data:` URL, stored before the server checked it,
// never runs in a viewer's page.

/** The URL when it is an absolute http(s) URL, else undefined (shown as text, not as a link). */
export function externalHref(url: string | null | undefined): string | undefined {
  if (!url) return undefined;
  try {
    const { protocol } = new URL(url);
    return protocol === 'https:' || protocol === 'http:' ? url : undefined;
  } catch {
    return undefined;
  }
}
