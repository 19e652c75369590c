// Uploading a store path of the local Nix store through the REST API (chunk + finalize), for tests
// that need a cache with real paths in it without going through `nix copy` or the kiln CLI.
import { nixPathInfo, nixStoreDump } from './nixStore.js';

export interface RestUploadResult {
  status: number;
  body: { error: boolean; message: unknown; code?: string };
}

export async function uploadStorePath(url: string, token: string, cache: string, storePath: string): Promise<RestUploadResult> {
  const info = nixPathInfo(storePath);
  const hash = storePath.slice('/nix/store/'.length, '/nix/store/'.length + 32);
  const nar = nixStoreDump(storePath);
  const headers = { authorization: `Bearer ${token}` };
  const chunk = await fetch(`${url}/api/v1/caches/${cache}/nars/${hash}/chunk?offset=0`, { method: 'PUT', headers, body: nar });
  if (chunk.status !== 200) return { status: chunk.status, body: (await chunk.json()) as RestUploadResult['body'] };
  const res = await fetch(`${url}/api/v1/caches/${cache}/nars/${hash}/finalize`, {
    method: 'POST',
    headers: { ...headers, 'content-type': 'application/json' },
    body: JSON.stringify({
      store_path: storePath, nar_hash: info.narHash, nar_size: info.narSize, references: info.references,
      ...(info.deriver ? { deriver: info.deriver } : {}), ...(info.ca ? { ca: info.ca } : {}),
    }),
  });
  return { status: res.status, body: (await res.json()) as RestUploadResult['body'] };
}
