// A .drv file as Nix writes it (libstore/derivations.cc, the ATerm form):
// Derive([outputs],[inputDrvs],[inputSrcs],"system","builder",[args],[env]), where an output is
// ("name","path","hashAlgo","hash"), an input derivation ("path",["out",…]) and an env entry
// ("name","value"). Strings escape \" \\ \n \r \t.
import { parseFailure, parsedOk, type Parsed } from './parsed.js';

export interface DerivationOutput {
  /** empty for a content-addressed (floating) output */
  path: string;
  hashAlgo: string;
  hash: string;
}

export interface Derivation {
  outputs: Record<string, DerivationOutput>;
  inputDrvs: Record<string, string[]>;
  inputSrcs: string[];
  system: string;
  builder: string;
  args: string[];
  env: Record<string, string>;
}

class AtermError extends Error {}

class Reader {
  at = 0;
  constructor(private readonly text: string) {}

  literal(token: string): void {
    if (!this.text.startsWith(token, this.at)) {
      throw new AtermError(`expected ${JSON.stringify(token)} at character ${this.at}, got ${JSON.stringify(this.text.slice(this.at, this.at + 20))}`);
    }
    this.at += token.length;
  }

  peek(token: string): boolean {
    return this.text.startsWith(token, this.at);
  }

  string(): string {
    this.literal('"');
    let out = '';
    for (;;) {
      const c = this.text[this.at++];
      if (c === undefined) throw new AtermError('the text ends inside a string');
      if (c === '"') return out;
      if (c !== '\\') {
        out += c;
        continue;
      }
      const e = this.text[this.at++];
      if (e === undefined) throw new AtermError('the text ends inside an escape');
      out += e === 'n' ? '\n' : e === 'r' ? '\r' : e === 't' ? '\t' : e;
    }
  }

  list<T>(item: () => T): T[] {
    this.literal('[');
    const items: T[] = [];
    while (!this.peek(']')) {
      if (items.length > 0) this.literal(',');
      items.push(item());
    }
    this.literal(']');
    return items;
  }

  tuple<T>(body: () => T): T {
    this.literal('(');
    const value = body();
    this.literal(')');
    return value;
  }

  get done(): boolean {
    return this.at === this.text.length;
  }
}

/** Parses the text of a .drv file; `field` names it in the failure. */
export function parseDerivation(text: string, field = 'derivation'): Parsed<Derivation> {
  const r = new Reader(text);
  try {
    r.literal('Derive(');
    const outputs: Record<string, DerivationOutput> = {};
    for (const [name, output] of r.list(() => r.tuple(() => {
      const name = r.string();
      r.literal(',');
      const path = r.string();
      r.literal(',');
      const hashAlgo = r.string();
      r.literal(',');
      return [name, { path, hashAlgo, hash: r.string() }] as const;
    }))) outputs[name] = output;
    r.literal(',');
    const inputDrvs: Record<string, string[]> = {};
    for (const [path, names] of r.list(() => r.tuple(() => {
      const path = r.string();
      r.literal(',');
      return [path, r.list(() => r.string())] as const;
    }))) inputDrvs[path] = names;
    r.literal(',');
    const inputSrcs = r.list(() => r.string());
    r.literal(',');
    const system = r.string();
    r.literal(',');
    const builder = r.string();
    r.literal(',');
    const args = r.list(() => r.string());
    r.literal(',');
    const env: Record<string, string> = {};
    for (const [name, value] of r.list(() => r.tuple(() => {
      const name = r.string();
      r.literal(',');
      return [name, r.string()] as const;
    }))) env[name] = value;
    r.literal(')');
    if (!r.done) throw new AtermError(`${text.length - r.at} characters follow the derivation`);
    if (Object.keys(outputs).length === 0) throw new AtermError('the derivation has no outputs');
    return parsedOk({ outputs, inputDrvs, inputSrcs, system, builder, args, env });
  } catch (e) {
    if (e instanceof AtermError) return parseFailure(field, `not a derivation (ATerm): ${e.message}`);
    throw e;
  }
}
