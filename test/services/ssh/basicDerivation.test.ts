// The BasicDerivation a BuildDerivation carries (services/ssh/farmBuilds.ts readBasicDerivationOutputs)
// from a hostile client: the outputs are kept for the whole farm build, so their names and paths
// are held to what a store path can be, not to the wire's 1 MiB string cap (1000 outputs of two
// such strings would pin 2 GB per session). A well-formed derivation still reads.
import t from 'tap';
import { WireError, WireReader, wireString, wireStrings, wireU64 } from '../../../protocol/index.js';
import { readBasicDerivationOutputs } from '../../../services/ssh/farmBuilds.js';

/** A BasicDerivation as writeDerivation sends it, with the given outputs (name, path). */
function basicDerivation(outputs: [string, string][]): WireReader {
  const bytes = Buffer.concat([
    wireU64(outputs.length),
    ...outputs.flatMap(([name, path]) => [wireString(name), wireString(path), wireString(''), wireString('')]),
    wireStrings([]), wireString('x86_64-linux'), wireString('/bin/sh'), wireStrings([]), wireU64(1), wireString('out'), wireString('/nix/store/x'),
  ]);
  return new WireReader([bytes]);
}

const outPath = '/nix/store/0c6kzph7l0dcbfmjap64f0czdafn3b7x-hello-2.12';

t.test('a well-formed derivation reads its outputs', async (t) => {
  t.same(await readBasicDerivationOutputs(basicDerivation([['out', outPath], ['dev', '']])), { out: outPath, dev: '' });
});

t.test('an output name longer than a store path name is refused', async (t) => {
  await t.rejects(readBasicDerivationOutputs(basicDerivation([['o'.repeat(100_000), outPath]])), WireError);
});

t.test('an output path longer than PATH_MAX is refused', async (t) => {
  await t.rejects(readBasicDerivationOutputs(basicDerivation([['out', `/nix/store/${'a'.repeat(500_000)}`]])), WireError);
});
