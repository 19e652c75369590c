// Which projects a Git host's event is about: a project whose repository URL names the same
// repository as one of the event's URLs (clone_url, html_url, ssh_url, git_url). The same
// repository is spelled many ways (https with or without .git, ssh://, scp-like git@host:…, a
// trailing slash, any letter case at the host), so both sides are reduced to one key first.
import type { HookRepository } from '../../protocol/index.js';

/**
 * `host/owner/name` in lower case for a hosted repository, `file:<path>` for a local one (tests'
 * git+file:// remotes), or null for what names no repository.
 */
export function repositoryKey(url: string): string | null {
  let text = url.trim().replace(/^git\+/, '');
  if (text === '') return null;
  const strip = (path: string) => path.replace(/\/+$/, '').replace(/\.git$/, '').replace(/\/+$/, '');
  if (text.startsWith('file://')) {
    let path: string;
    try {
      path = decodeURIComponent(new URL(text).pathname);
    } catch {
      return null;
    }
    return `file:${strip(path)}`;
  }
  if (text.startsWith('/')) return `file:${strip(text)}`;
  // scp-like: [user@]host:path (a ':' before any '/')
  const scp = /^(?:[^@/:]+@)?([^/:[\]]+):(?!\/\/)(.+)$/.exec(text);
  if (scp && !/^[a-z][a-z0-9+.-]*:\/\//i.test(text)) text = `ssh://${scp[1]}/${scp[2]}`;
  let parsed: URL;
  try {
    parsed = new URL(text);
  } catch {
    return null;
  }
  const path = strip(decodeURIComponent(parsed.pathname).replace(/^\/+/, ''));
  if (parsed.hostname === '' || path === '') return null;
  return `${parsed.hostname.toLowerCase()}/${path.toLowerCase()}`;
}

/** The keys of every URL the event gives for its repository. */
export function eventRepositoryKeys(repository: HookRepository): Set<string> {
  const urls = [repository.clone_url, repository.html_url, repository.ssh_url, repository.git_url];
  return new Set(urls.flatMap((u) => (u === undefined ? [] : [repositoryKey(u)])).filter((k): k is string => k !== null));
}
