import t from 'tap';
import { ReferenceScanner } from '../../../storage/index.js';

const A = '2wgwwrzq33820k7hi44rfakjcgd5cyrc';
const B = '9b65k7anny3l686i7x8fwirgar8l531z';
const C = 'w8qc6q0b0i9csmp6qyn78ya11wiz8d8a';

t.test('finds hash parts wherever they are, also across chunk seams of any size', async (t) => {
  const text = Buffer.from(`head /nix/store/${A}-a middle ${B} tail`);
  for (let size = 1; size <= text.length; size++) {
    const scanner = new ReferenceScanner([A, B, C]);
    for (let i = 0; i < text.length; i += size) scanner.push(text.subarray(i, i + size));
    t.same(scanner.missing, [C], `chunks of ${size} bytes`);
  }
});

t.test('a hash cut short or split by other bytes is not found', async (t) => {
  const scanner = new ReferenceScanner([A]);
  scanner.push(Buffer.from(A.slice(0, 31)));
  scanner.push(Buffer.from('x'));
  scanner.push(Buffer.from(A.slice(1)));
  t.same(scanner.missing, [A]);
});

t.test('nothing to look for costs nothing', async (t) => {
  const scanner = new ReferenceScanner([]);
  scanner.push(Buffer.alloc(1 << 20));
  t.same(scanner.missing, []);
});
