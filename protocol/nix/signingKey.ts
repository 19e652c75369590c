// Nix's Ed25519 keys and detached signatures (libstore/crypto.cc). Key files are
// `<name>:<base64>`: 64 bytes for a secret key (libsodium's seed followed by the public key),
// 32 for a public key; a signature is `<key name>:<base64 of 64 bytes>`. The node:crypto key
// objects are built once per key, since importing a key costs more than a signature.
import { createPrivateKey, createPublicKey, generateKeyPairSync, sign, verify, type KeyObject } from 'node:crypto';
import { parseFailure, parsedOk, type Parsed } from './parsed.js';

const SEED_BYTES = 32;
const PUBLIC_BYTES = 32;
const SIGNATURE_BYTES = 64;
const BASE64 = /^[A-Za-z0-9+/]*={0,2}$/;
const KEY_NAME = /^[^\s:]+$/;

const b64url = (bytes: Uint8Array): string => Buffer.from(bytes).toString('base64url');
const fromB64url = (text: string | undefined): Buffer => Buffer.from(text ?? '', 'base64url');
const toBytes = (message: string | Uint8Array): Buffer => (typeof message === 'string' ? Buffer.from(message) : Buffer.from(message));

/** Splits `<name>:<base64>` and decodes it, checking the byte count. */
function splitKeyText(text: string, bytes: number, field: string): Parsed<{ name: string; data: Buffer }> {
  const trimmed = text.trim();
  const colon = trimmed.indexOf(':');
  if (colon < 1) return parseFailure(field, 'expected "<key name>:<base64>"');
  const name = trimmed.slice(0, colon);
  if (!KEY_NAME.test(name)) return parseFailure(field, `the key name ${JSON.stringify(name)} has a space or a colon`);
  const encoded = trimmed.slice(colon + 1);
  const data = Buffer.from(encoded, 'base64');
  if (!BASE64.test(encoded) || data.length !== bytes) {
    return parseFailure(field, `expected ${bytes} bytes of base64 after "${name}:", got ${BASE64.test(encoded) ? `${data.length} bytes` : 'characters outside base64'}`);
  }
  return parsedOk({ name, data });
}

/** A public key, as Nix's `trusted-public-keys` lists it. */
export class VerifyingKey {
  private constructor(
    readonly name: string,
    private readonly key: KeyObject,
    private readonly raw: Buffer,
  ) {}

  static parse(text: string): Parsed<VerifyingKey> {
    const split = splitKeyText(text, PUBLIC_BYTES, 'publicKey');
    if (!split.ok) return split;
    const { name, data } = split.value;
    const key = createPublicKey({ key: { kty: 'OKP', crv: 'Ed25519', x: b64url(data) }, format: 'jwk' });
    return parsedOk(new VerifyingKey(name, key, data));
  }

  /** @internal Built by SigningKey from its own public half. */
  static fromKeyObject(name: string, key: KeyObject): VerifyingKey {
    return new VerifyingKey(name, key, fromB64url(key.export({ format: 'jwk' }).x));
  }

  /** True when `signature` (`<name>:<base64>`) is this key's signature of `message`. */
  verify(message: string | Uint8Array, signature: string): boolean {
    const colon = signature.indexOf(':');
    if (colon < 0 || signature.slice(0, colon) !== this.name) return false;
    const encoded = signature.slice(colon + 1);
    const sig = Buffer.from(encoded, 'base64');
    if (!BASE64.test(encoded) || sig.length !== SIGNATURE_BYTES) return false;
    return verify(null, toBytes(message), this.key, sig);
  }

  /** The key file text: `<name>:<base64 of 32 bytes>`. */
  toString(): string {
    return `${this.name}:${this.raw.toString('base64')}`;
  }
}

/** A secret key, built once from its key file text, that signs as `nix store sign` does. */
export class SigningKey {
  readonly publicKey: VerifyingKey;

  private constructor(
    readonly name: string,
    private readonly key: KeyObject,
    private readonly seed: Buffer,
  ) {
    this.publicKey = VerifyingKey.fromKeyObject(name, createPublicKey(key));
  }

  /** Parses `nix key generate-secret` output; a trailing newline is fine. */
  static parse(text: string): Parsed<SigningKey> {
    const split = splitKeyText(text, SEED_BYTES + PUBLIC_BYTES, 'secretKey');
    if (!split.ok) return split;
    const { name, data } = split.value;
    const seed = data.subarray(0, SEED_BYTES);
    const key = createPrivateKey({ key: { kty: 'OKP', crv: 'Ed25519', d: b64url(seed), x: b64url(data.subarray(SEED_BYTES)) }, format: 'jwk' });
    const signingKey = new SigningKey(name, key, Buffer.from(seed));
    // libsodium stores the public key beside the seed; a file whose halves disagree is corrupt.
    if (signingKey.publicKey.toString() !== `${name}:${data.subarray(SEED_BYTES).toString('base64')}`) {
      return parseFailure('secretKey', 'the public half does not belong to the secret half');
    }
    return parsedOk(signingKey);
  }

  static generate(name: string): SigningKey {
    if (!KEY_NAME.test(name)) throw new Error(`key name ${JSON.stringify(name)} must be non-empty without spaces or colons`);
    const { privateKey } = generateKeyPairSync('ed25519');
    return new SigningKey(name, privateKey, fromB64url(privateKey.export({ format: 'jwk' }).d));
  }

  /** `<name>:<base64 signature>`, the value of a narinfo `Sig:` line. */
  sign(message: string | Uint8Array): string {
    return `${this.name}:${sign(null, toBytes(message), this.key).toString('base64')}`;
  }

  /** The key file text Nix reads: `<name>:<base64 of seed ‖ public key>`. */
  toString(): string {
    const pub = this.publicKey.toString().slice(this.name.length + 1);
    return `${this.name}:${Buffer.concat([this.seed, Buffer.from(pub, 'base64')]).toString('base64')}`;
  }
}
