// REST NAR uploads from a test client: what the `kiln cache upload` CLI does, written plainly.
import { nixPathInfo, nixStoreDump, type NixPathInfo } from './nixStore.js';
import type { TestKiln } from './kiln.js';
import { createTestCache } from './caches.js';

export interface LocalNar {
  info: NixPathInfo;
  /** the store path's hash part */
  hash: string;
  nar: Buffer;
}

/** A store path's NAR and its path info, from the local Nix store. */
export function localNar(path: string): LocalNar {
  const info = nixPathInfo(path);
  return { info, hash: path.slice('/nix/store/'.length, '/nix/store/'.length + 32), nar: nixStoreDump(path) };
}

/** The narinfo JSON the upload API takes. */
export function uploadInfo(info: NixPathInfo): Record<string, unknown> {
  return {
    store_path: info.path,
    nar_hash: info.narHash,
    nar_size: info.narSize,
    references: info.references,
    ...(info.deriver ? { deriver: info.deriver } : {}),
    ...(info.ca ? { ca: info.ca } : {}),
  };
}

export interface HttpAnswer {
  status: number;
  headers: Headers;
  body: { error?: boolean; message?: unknown; code?: string };
}

async function answer(res: Response): Promise<HttpAnswer> {
  const text = await res.text();
  let body: HttpAnswer['body'] = {};
  try {
    body = JSON.parse(text) as HttpAnswer['body'];
  } catch {
    body = { message: text };
  }
  return { status: res.status, headers: res.headers, body };
}

export async function putChunk(kiln: TestKiln, token: string, cache: string, hash: string, offset: number, bytes: Uint8Array): Promise<HttpAnswer> {
  return answer(await fetch(`${kiln.url}/api/v1/caches/${cache}/nars/${hash}/chunk?offset=${offset}`, {
    method: 'PUT', headers: { authorization: `Bearer ${token}`, 'content-type': 'application/octet-stream' }, body: bytes,
  }));
}

export async function finalize(kiln: TestKiln, token: string, cache: string, hash: string, info: unknown): Promise<HttpAnswer> {
  return answer(await fetch(`${kiln.url}/api/v1/caches/${cache}/nars/${hash}/finalize`, {
    method: 'POST', headers: { authorization: `Bearer ${token}`, 'content-type': 'application/json' }, body: JSON.stringify(info),
  }));
}

/** Chunked upload then finalize; the finalize answer. */
export async function uploadChunked(kiln: TestKiln, token: string, cache: string, nar: LocalNar, chunkBytes = 64 * 1024): Promise<HttpAnswer> {
  for (let offset = 0; offset < nar.nar.length; offset += chunkBytes) {
    const put = await putChunk(kiln, token, cache, nar.hash, offset, nar.nar.subarray(offset, offset + chunkBytes));
    if (put.status !== 200) return put;
  }
  return finalize(kiln, token, cache, nar.hash, uploadInfo(nar.info));
}

/**
 * A large chunked upload through serving threads into a new public cache named `prefix` + try:
 * relayed uploads still reset now and then (docs/http.md, "Serving threads"), so a reset upload
 * is tried again into a fresh cache, at most three times. The cache and its finalize answer.
 */
export async function uploadIntoFreshCache(kiln: TestKiln, owner: { id: string; token: string }, prefix: string, nar: LocalNar, chunkBytes: number): Promise<{ cache: string; answer: HttpAnswer }> {
  for (let attempt = 1; ; attempt++) {
    const cache = `${prefix}${attempt}`;
    await createTestCache(kiln.sql, cache, { public: true, ownerId: owner.id });
    try {
      return { cache, answer: await uploadChunked(kiln, owner.token, cache, nar, chunkBytes) };
    } catch (e) {
      if (!(e instanceof TypeError) || attempt >= 3) throw e;
    }
  }
}

/** Single-shot multipart upload; parts in the order given. */
export async function uploadSingle(kiln: TestKiln, token: string, cache: string, parts: { narinfo?: unknown; nar?: Uint8Array }): Promise<HttpAnswer> {
  const form = new FormData();
  if (parts.narinfo !== undefined) form.append('narinfo', new Blob([JSON.stringify(parts.narinfo)], { type: 'application/json' }));
  if (parts.nar !== undefined) form.append('nar', new Blob([parts.nar], { type: 'application/octet-stream' }), 'path.nar');
  return answer(await fetch(`${kiln.url}/api/v1/caches/${cache}/nars`, { method: 'POST', headers: { authorization: `Bearer ${token}` }, body: form }));
}

/** An API key with the given permissions, made through the real API by a signed-in user. */
export async function createApiKey(kiln: TestKiln, sessionToken: string, name: string, permissions: string[]): Promise<string> {
  const res = await kiln.api<{ key?: string; secret?: string; token?: string }>('POST', '/user/keys', { token: sessionToken, body: { name, permissions } });
  if (res.status !== 200) throw new Error(`creating API key ${name}: ${res.status} ${JSON.stringify(res.message)}`);
  const key = res.message.key ?? res.message.secret ?? res.message.token;
  if (!key) throw new Error(`POST /user/keys answered without the key: ${JSON.stringify(res.message)}`);
  return key;
}
