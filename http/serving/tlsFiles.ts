// tls.certFile / tls.keyFile checked once in the main thread before any serving thread starts: uWS's
// SSL app takes file names and, given a bad pair, fails in native code without saying why.
import { readFileSync } from 'node:fs';
import { createSecureContext } from 'node:tls';
import type { TlsFiles } from './threadMessages.js';

/** The pair as given when it loads as a certificate chain with its key; otherwise an error naming the option and the problem. */
export function checkedTlsFiles(certFile: string, keyFile: string): TlsFiles {
  const read = (option: string, file: string): Buffer => {
    try {
      return readFileSync(file);
    } catch (e) {
      throw new Error(`${option} ${file} cannot be read: ${(e as Error).message}`, { cause: e });
    }
  };
  const cert = read('tls.certFile', certFile);
  const key = read('tls.keyFile', keyFile);
  try {
    createSecureContext({ cert, key });
  } catch (e) {
    throw new Error(`tls.certFile ${certFile} and tls.keyFile ${keyFile} are not a PEM certificate chain and its private key: ${(e as Error).message}`, { cause: e });
  }
  return { certFile, keyFile };
}
