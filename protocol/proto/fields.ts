// Field types that several /proto messages share.
import { z } from 'zod';
import { parseContentAddress } from '../nix/contentAddress.js';
import { parseStorePath } from '../nix/storePath.js';

/** A full store path in /nix/store, checked by Nix's own rules. */
export const StorePathText = z.string().max(300).superRefine((text, ctx) => {
  const parsed = parseStorePath(text);
  if (!parsed.ok) ctx.addIssue({ code: 'custom', message: parsed.reason });
});

/** A store derivation: a store path ending in `.drv`. */
export const DrvPathText = StorePathText.refine((text) => text.endsWith('.drv'), { message: 'a derivation path ends in .drv' });

/** `sha256:<nix32>`, the form a narinfo's NarHash takes. */
export const NarHashText = z.string().regex(/^sha256:[0-9a-df-np-sv-z]{52}$/, 'expected sha256:<52 nix32 characters>');
/** A narinfo's CA value, checked as the narinfo parser checks it: it goes into a signed narinfo, so no line break may ride along. */
export const ContentAddressText = z.string().max(300).refine((ca) => parseContentAddress(ca).ok, 'expected text:<hash>, fixed:<hash> or fixed:r:<hash>');

/** Chosen by the server; opaque to the worker. */
export const JobId = z.string().regex(/^[A-Za-z0-9._:-]{1,128}$/, 'a job id is 1 to 128 of A-Z a-z 0-9 . _ : -');

/** A git commit: 40 (SHA-1) or 64 (SHA-256) lowercase hex digits. */
export const CommitHash = z.string().regex(/^([0-9a-f]{40}|[0-9a-f]{64})$/, 'a commit is 40 or 64 lowercase hex digits');

/** A system type such as x86_64-linux. */
export const SystemType = z.string().regex(/^[A-Za-z0-9_.+-]{1,64}$/, 'a system type such as x86_64-linux');

/** A system feature such as kvm or big-parallel. */
export const SystemFeature = z.string().regex(/^[A-Za-z0-9_.+-]{1,64}$/, 'a system feature such as kvm');

/** Raw bytes (MessagePack bin): msgpackr decodes them as a Buffer, which is a Uint8Array. */
export const Bytes = z.custom<Uint8Array>((value) => value instanceof Uint8Array, { message: 'expected binary data' });

export const Seconds = z.int().min(0).max(366 * 24 * 3600);
export const ByteCount = z.int().min(0).max(Number.MAX_SAFE_INTEGER);
